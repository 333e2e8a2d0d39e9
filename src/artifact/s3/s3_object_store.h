// ObjectStore in a bucket of an S3-compatible store (AWS S3, MinIO, Ceph
// RGW, OpenStack Swift's s3api), through the S3 client (artifact/s3/s3_client.h).
// Clients move the bytes themselves with presigned URLs: a PUT bound to its
// bytes by Content-MD5 and Content-Length (up to 5 GiB, S3's limit for one
// PUT), the parts of a multipart upload bound the same way (any size, and
// resumable: OpenMultipart finds an unfinished upload of the same key), and
// a GET.
#pragma once

#include <memory>
#include <string>

#include "artifact/object_store.h"
#include "artifact/s3/s3_client.h"
#include "core/time.h"

namespace headway {

struct S3ObjectStoreOptions {
  S3ClientOptions client;
  std::string bucket;
  std::string prefix;  // put before every key, e.g. "headway/"
  // Presigned URLs name this endpoint instead of the client's (when clients
  // reach the store by another address than the server does).
  std::string public_endpoint;
};

// Creates the bucket when it does not exist yet. `clock` must outlive the store.
Result<std::unique_ptr<ObjectStore>> OpenS3ObjectStore(S3ObjectStoreOptions options,
                                                       const Clock& clock);

}  // namespace headway
