"""Signs the requests described on stdin with botocore, for sigv4_test.cc.

Input: a JSON list of cases; output: a JSON list of {"authorization",
"x-amz-date"} (header signing) or {"url"} (presigning), in the same order.
The path and query arrive decoded and are encoded the way botocore's S3
serializer encodes them (quote with '/' and '~' safe for the path).
"""
import datetime as _dt
import json
import sys
from urllib.parse import quote

import botocore.auth as auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


class _Frozen(_dt.datetime):
    at = None

    @classmethod
    def utcnow(cls):
        return cls.at


class _DatetimeModule:
    datetime = _Frozen


auth.datetime = _DatetimeModule  # a fixed signing time


class _S3Config:
    def __init__(self, sign_payload):
        self.s3 = {"payload_signing_enabled": sign_payload}


def url_of(c):
    port = c["port"]
    default = port == 0 or (c["scheme"], port) in (("http", 80), ("https", 443))
    netloc = c["host"] if default else f"{c['host']}:{port}"
    query = "&".join(quote(k, safe="-_.~") + "=" + quote(v, safe="-_.~") for k, v in c["query"])
    return f"{c['scheme']}://{netloc}{quote(c['path'], safe='/~')}" + (f"?{query}" if query else "")


out = []
for c in json.load(sys.stdin):
    _Frozen.at = _dt.datetime.utcfromtimestamp(c["time"])
    creds = Credentials(c["access_key"], c["secret_key"], c["token"] or None)
    request = AWSRequest(method=c["method"], url=url_of(c), data=c["body"].encode())
    for name, value in c["headers"]:
        request.headers[name] = value  # appends: repeated names stay repeated
    if c["kind"] == "header":
        request.context["client_config"] = _S3Config(not c["unsigned"])
        auth.S3SigV4Auth(creds, "s3", c["region"]).add_auth(request)
        out.append({"authorization": request.headers["Authorization"],
                    "x-amz-date": request.headers["X-Amz-Date"],
                    "x-amz-content-sha256": request.headers["X-Amz-Content-SHA256"]})
    else:
        auth.S3SigV4QueryAuth(creds, "s3", c["region"], expires=c["expires"]).add_auth(request)
        out.append({"url": request.url})
json.dump(out, sys.stdout)
