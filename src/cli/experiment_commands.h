// The experiment commands of `headway` (`exp create|get|describe|stop|delete`).
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <string>

#include "cli/command_support.h"

namespace headway::cli {

int ExpCreate(const Options& o, const std::string& text);
int ExpCreate(const Options& o);
int ExpGet(const Options& o);
int ExpDescribe(const Options& o);
int ExpStop(const Options& o);
// Deletes an ended experiment with its trials' jobs (o.name).
int ExpDelete(const Options& o);

}  // namespace headway::cli
