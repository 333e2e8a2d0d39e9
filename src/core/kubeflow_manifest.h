// Kubeflow Trainer `TrainJob` manifests (trainer.kubeflow.org/v1alpha1) run
// as Headway jobs, so a manifest written for Kubeflow is submitted unchanged:
//
//   metadata.name (or generateName)  -> name (or generate_name)
//   metadata.namespace               -> team (default "default")
//   metadata.labels                  -> labels; kueue.x-k8s.io/queue-name also sets the queue
//   spec.runtimeRef.name             -> label trainer.kubeflow.org/runtime
//   spec.trainer.image               -> label trainer.kubeflow.org/image (recorded; the
//                                       command runs as a process on the pool, not in a container)
//   spec.trainer.command, args, env  -> command, args, env (env values only, no valueFrom)
//   spec.trainer.numNodes            -> resources.nodes
//   spec.trainer.resourcesPerNode    -> per node: nvidia.com/gpu -> GPUs, cpu, memory
//   spec.trainer.numProcPerNode      -> PET_NPROC_PER_NODE (default auto)
//   spec.activeDeadlineSeconds       -> time_limit
//
// As on Kubeflow's torch runtime, each node runs the command once with the
// torchrun variables PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
// PET_MASTER_ADDR and PET_MASTER_PORT set, so `torchrun train.py` starts
// numProcPerNode workers per node. Fields Headway cannot honour
// (initializers, runtime patches, valueFrom, other resources) are refused
// by name with their line, never ignored.
#pragma once

#include <string_view>

#include "core/job.h"
#include "core/status.h"

namespace headway {

// Whether `document` declares itself a TrainJob (apiVersion
// trainer.kubeflow.org/..., kind TrainJob). False for anything unparsable.
bool IsTrainJobManifest(std::string_view document);

Result<JobSpec> ParseTrainJobManifest(std::string_view document);

}  // namespace headway
