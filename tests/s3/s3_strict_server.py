#!/usr/bin/python3
"""A small S3 test server that checks every request's SigV4 signature and fails on demand.

Used by the OBJ tests (tests/s3/*) next to s3rver, which accepts anything that looks signed:
this one recomputes each request's signature with the secret (botocore's SigV4 signer, Debian's
python3-botocore) and answers 403 when it differs, so a broken signer fails a test, and it can
answer 403, 503 SlowDown, malformed XML, truncated bodies, wrong checksums, stalls and a death
mid-body on demand.

    /usr/bin/python3 tests/s3/s3_strict_server.py --port-file F [--access-key AK --secret-key SK]
        [--session-token T] [--region R | --any-region] [--bucket B ...]
        [--vhost-suffix localhost] [--small-parts] [--allow-missing-content-sha256]
        [--tls-dir DIR]

Listens on 127.0.0.1 with an ephemeral port (--port 0, the default); writes the port to
--port-file (written whole, then renamed into place) and prints "PORT <n>" and "... listening
on 127.0.0.1:<n>" on stdout. Exits 77 with a message when botocore is missing. Data lives in
memory. SIGTERM/SIGINT end it. It takes s3rver's arguments as the OBJ tests' harness gives them
(tests/s3/s3_server.h: IXL_S3_SERVER="/usr/bin/python3 tests/s3/s3_strict_server.py
--access-key S3RVER --secret-key S3RVER --any-region" runs those tests against this server):
--address, --port, --directory (ignored), --bucket.

HTTPS (--tls-dir DIR): the server makes, with the openssl command line, a test CA (DIR/ca.pem),
a server certificate it signs (DIR/server.pem, DIR/server.key: names localhost, 127.0.0.1 and
BUCKET.<vhost-suffix> for each --bucket, for virtual-hosted addressing) and a second, unrelated
CA (DIR/other-ca.pem, for "a wrong CA" cases), all valid for two days; then serves the same
S3 over TLS on a second ephemeral port, written as the port file's second line (and printed
"TLS <n>"). The first port stays plain HTTP (the control endpoint and plain requests). Exits 77
with a message when openssl is missing.

S3 subset (path-style /BUCKET/KEY, or virtual-hosted BUCKET.<vhost-suffix>[:port]/KEY):
  PUT object (Content-MD5 and x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} verified),
  GET object (Range: bytes=a-b | a- | -n; 206 + Content-Range; 416 InvalidRange; the stored
  x-amz-checksum-* header on whole-object GETs with x-amz-checksum-mode: ENABLED), HEAD object,
  DELETE object, CreateMultipartUpload (POST ?uploads), UploadPart (PUT ?partNumber&uploadId),
  CompleteMultipartUpload (POST ?uploadId, part ETags checked), AbortMultipartUpload (DELETE
  ?uploadId), ListMultipartUploads (GET /BUCKET?uploads), CreateBucket (PUT /BUCKET), HeadBucket,
  DeleteBucket. Errors are S3's XML bodies (<Error><Code>..</Code><Message>..</Message>..):
  NoSuchBucket, NoSuchKey, NoSuchUpload, InvalidPart, InvalidRange, BadDigest,
  XAmzContentSHA256Mismatch, SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied,
  InvalidToken, RequestTimeTooSkewed, AuthorizationHeaderMalformed, MissingSecurityHeader.

Authentication (every request outside /__ctl): Authorization: AWS4-HMAC-SHA256 with the
configured access key, region and service s3; X-Amz-Date within 15 minutes; the signed headers
include host, x-amz-date, x-amz-content-sha256 (required, as S3 requires it; hex payload hashes
are checked against the body; UNSIGNED-PAYLOAD is accepted) and every x-amz-* header sent; with
--session-token, x-amz-security-token must be sent, signed and equal. The canonical request is
botocore's (S3 rules: the path as sent, the query sorted with "k=" for a bare "k").

Control (unauthenticated, for tests; JSON in and out):
  POST /__ctl/fault   a rule or a list of rules; answers {"ids": [...]}. A rule:
      {"method": "GET"|"PUT"|"POST"|"DELETE"|"HEAD"|"*",   (default "*")
       "key": "exact key" | "key_prefix": "p",  "query": "substring of the query string",
       "skip": M (let the first M matching requests through), "count": N (act on the next N,
       default 1, -1 = every one), "action": one of
         "status"     answer "status" (default 503) with S3 error "code" (default SlowDown) and
                      "message"
         "malformed"  answer "status" (default 200) with "body" (default broken XML) as XML
         "truncate"   serve the request, but send only "bytes" (default half) of the body
                      under a Content-Length of all of it, then close the connection
         "bad_checksum" serve the request with a wrong x-amz-checksum-"algo" header (default
                      crc32) and a wrong ETag (GET/HEAD); on a PUT or UploadPart that sent a
                      checksum, store the body but echo a wrong value of that checksum
         "corrupt"    serve the request with one body byte flipped (headers as stored; with
                      "with_checksum": true, the stored checksum also on a ranged GET of the
                      whole object, which S3 itself leaves out)
         "stall"      sleep "seconds" (default 30) before answering, or, with "after_bytes",
                      after sending that much of the body
         "close"      close the connection without answering (after reading the request), or
                      after "after_bytes" of the body
         "die"        the whole server process exits (code 3) after "after_bytes" (default 0)
                      of the body: a server killed mid-transfer
      }
  POST /__ctl/reset   drops the rules and the log (not the data)
  GET  /__ctl/log     [{"method","bucket","key","query","status","fault"}...] for each request,
                      logged on arrival ("status": null until answered)
                      (?method=GET&key=K...: only the entries whose fields equal these)
  GET  /__ctl/uploads outstanding multipart uploads [{"bucket","key","upload_id","parts"}...]
  GET  /__ctl/object?bucket=B&key=K   the stored bytes (404 if none)
  PUT  /__ctl/object?bucket=B&key=K   stores the body as the object (no checksum)
  POST /__ctl/bucket?name=B           creates a bucket;  DELETE /__ctl/bucket?name=B drops it
  POST /__ctl/config  {"access_key", "secret_key", "session_token" (null: none), "region"}:
                      what requests are checked against from now on
  POST /__ctl/exit    ends the server
"""

import argparse
import base64
import datetime
import hashlib
import hmac
import json
import os
import signal
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

try:
    from botocore.auth import SIGNED_HEADERS_BLACKLIST, S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:  # the tests skip (77) or, under CI=true, fail on this
    print("SKIP: python3-botocore is missing (apt-get install python3-botocore)", file=sys.stderr)
    sys.exit(77)


def _crc_table(poly, width):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc_table(0x82F63B78, 32)
_CRC64NVME = _crc_table(0x9A6C9329AC4BC9B5, 64)


def _crc_reflected(table, width, data):
    # Pure Python (one table step per byte): fine for the small objects tests checksum.
    mask = (1 << width) - 1
    c = mask
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return (c ^ mask).to_bytes(width // 8, "big")


def checksum(algo, data):
    """S3's base64 checksum value of data for algo (crc32, crc32c, crc64nvme, sha1, sha256)."""
    if algo == "crc32":
        raw = zlib.crc32(data).to_bytes(4, "big")
    elif algo == "crc32c":
        raw = _crc_reflected(_CRC32C, 32, data)
    elif algo == "crc64nvme":
        raw = _crc_reflected(_CRC64NVME, 64, data)
    elif algo == "sha1":
        raw = hashlib.sha1(data).digest()
    elif algo == "sha256":
        raw = hashlib.sha256(data).digest()
    else:
        raise ValueError(algo)
    return base64.b64encode(raw).decode()


def echo_checksum(algo, value, body, fault):
    """The checksum an upload's answer echoes: the stored one, or a wrong one ("bad_checksum")."""
    if fault and fault["action"] == "bad_checksum":
        return checksum(algo, body + b"\x00")
    return value


CHECKSUM_ALGOS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")


class S3Error(Exception):
    def __init__(self, status, code, message, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


def xml_escape(s):
    return (
        str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        .replace('"', "&quot;")
    )


def xml_doc(root, fields):
    inner = "".join(f"<{k}>{xml_escape(v)}</{k}>" for k, v in fields)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root}>{inner}</{root}>'.encode()


class Obj:
    def __init__(self, data, etag, checksum_algo=None, checksum_value=None):
        self.data = data
        self.etag = etag
        self.checksum_algo = checksum_algo
        self.checksum_value = checksum_value
        self.mtime = time.time()


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.buckets = {b: {} for b in args.bucket}
        self.uploads = {}  # upload_id -> {"bucket", "key", "parts": {n: (data, etag)}}
        self.rules = []
        self.next_rule = 1
        self.log = []

    def take_fault(self, method, key, query):
        with self.lock:
            for r in self.rules:
                if r.get("method", "*") not in ("*", method):
                    continue
                if "key" in r and r["key"] != key:
                    continue
                if "key_prefix" in r and not (key or "").startswith(r["key_prefix"]):
                    continue
                if "query" in r and r["query"] not in query:
                    continue
                if r.get("skip", 0) > 0:
                    r["skip"] -= 1
                    continue
                if r["count"] == 0:
                    continue
                if r["count"] > 0:
                    r["count"] -= 1
                return dict(r)
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ixl-s3-test"
    sys_version = ""

    def log_message(self, fmt, *a):  # quiet; /__ctl/log has the record
        pass

    # ---- plumbing ----
    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline(1024)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, body=b"", headers=(), fault=None, content_type=None):
        """Sends a whole answer, applying a body fault (truncate/stall/close/die/corrupt)."""
        head_only = self.command == "HEAD"
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("x-amz-request-id", self.request_id)
        self.send_header("Content-Length", str(len(body)))
        action = fault["action"] if fault else None
        if action in ("truncate", "close", "die"):
            self.send_header("Connection", "close")
        self.end_headers()
        if head_only:
            self.wfile.flush()
            return
        if action == "corrupt" and body:
            b = bytearray(body)
            b[len(b) // 2] ^= 0x01
            body = bytes(b)
        mv = memoryview(body)
        if action in ("truncate", "stall", "close", "die"):
            if action == "truncate":
                cut = int(fault.get("bytes", len(body) // 2))
            else:
                cut = int(fault.get("after_bytes", 0 if action == "die" else len(body)))
            cut = max(0, min(cut, len(body)))
            self.wfile.write(mv[:cut])
            self.wfile.flush()
            if action == "stall":
                time.sleep(float(fault.get("seconds", 30)))
                self.wfile.write(mv[cut:])
                self.wfile.flush()
                return
            if action == "die":
                os._exit(3)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.wfile.write(mv)
        self.wfile.flush()

    def send_error_xml(self, e, fault=None):
        fields = [("Code", e.code), ("Message", e.message)]
        fields += list(e.extra.items())
        fields.append(("RequestId", self.request_id))
        self.send(e.status, xml_doc("Error", fields), fault=fault, content_type="application/xml")

    # ---- dispatch ----
    def handle_one(self):
        self.request_id = uuid.uuid4().hex[:16].upper()
        st = self.server.state
        url = urlsplit(self.path)
        if url.path.startswith("/__ctl/"):
            return self.control(st, url)
        bucket, key = self.locate(url)
        entry = {"method": self.command, "bucket": bucket, "key": key, "query": url.query,
                 "status": None, "fault": None}
        with st.lock:  # logged on arrival ("status": null until answered)
            st.log.append(entry)
        status = 500
        fault = None
        try:
            body = self.read_body()
            self.authenticate(st, url, body)
            fault = st.take_fault(self.command, key, url.query)
            entry["fault"] = fault["action"] if fault else None
            if fault and fault["action"] == "status":
                status = int(fault.get("status", 503))
                raise S3Error(
                    status,
                    fault.get("code", "SlowDown"),
                    fault.get("message", "Please reduce your request rate."),
                )
            if fault and fault["action"] == "malformed":
                status = int(fault.get("status", 200))
                xml = fault.get("body", '<?xml version="1.0"?><Initiate><UploadId>x</Upl')
                self.send(status, xml.encode(), content_type="application/xml")
                return
            if fault and fault["action"] == "close" and "after_bytes" not in fault:
                status = 0
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault and fault["action"] == "stall" and "after_bytes" not in fault:
                time.sleep(float(fault.get("seconds", 30)))
                fault = None
            status = self.s3(st, url, bucket, key, body, fault)
        except S3Error as e:
            status = e.status
            self.send_error_xml(e, fault if fault and fault["action"] != "status" else None)
        except (BrokenPipeError, ConnectionResetError):
            status = -1
            self.close_connection = True
        finally:
            with st.lock:
                entry["status"] = status

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

    def locate(self, url):
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        suffix = "." + self.server.state.args.vhost_suffix
        path = url.path
        if host.endswith(suffix) and len(host) > len(suffix):
            bucket = host[: -len(suffix)]
            key = unquote(path[1:]) if len(path) > 1 else None
        else:
            parts = path[1:].split("/", 1)
            bucket = unquote(parts[0]) or None
            key = unquote(parts[1]) if len(parts) > 1 and parts[1] else None
        return bucket, key

    # ---- SigV4 ----
    def authenticate(self, st, url, body):
        a = st.args
        auth = self.headers.get("Authorization")
        if not auth:
            raise S3Error(403, "AccessDenied", "Access Denied (no Authorization header)")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            raise S3Error(
                400, "InvalidRequest", "Only AWS4-HMAC-SHA256 header authentication is supported"
            )
        fields = {}
        for part in auth[len("AWS4-HMAC-SHA256 ") :].split(","):
            k, _, v = part.strip().partition("=")
            fields[k] = v
        try:
            cred = fields["Credential"].split("/")
            signed = fields["SignedHeaders"].split(";")
            sig = fields["Signature"]
            ak, day, region, service, term = cred
        except (KeyError, ValueError):
            raise S3Error(
                400, "AuthorizationHeaderMalformed",
                f"The authorization header is malformed: {auth}"
            )
        if ak != a.access_key:
            raise S3Error(
                403,
                "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records.",
                AWSAccessKeyId=ak,
            )
        if (region != a.region and not a.any_region) or service != "s3" or term != "aws4_request":
            raise S3Error(
                400,
                "AuthorizationHeaderMalformed",
                f"The authorization header is malformed; the credential scope "
                f"'{day}/{region}/{service}/{term}' is wrong; expecting "
                f"'{a.region}/s3/aws4_request'",
                Region=a.region,
            )
        amz_date = self.headers.get("X-Amz-Date")
        if not amz_date or not amz_date.startswith(day):
            raise S3Error(403, "AccessDenied", "X-Amz-Date is missing or disagrees with the scope")
        try:
            t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
        except ValueError:
            raise S3Error(403, "AccessDenied", f"X-Amz-Date '{amz_date}' is not ISO8601 basic")
        now = datetime.datetime.utcnow()
        if abs((now - t).total_seconds()) > 900:
            raise S3Error(
                403,
                "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large.",
            )
        sha = self.headers.get("X-Amz-Content-SHA256")
        if sha is None and not a.allow_missing_content_sha256:
            raise S3Error(
                400,
                "MissingSecurityHeader",
                "Your request was missing a required header",
                MissingHeaderName="x-amz-content-sha256",
            )
        need = {"host", "x-amz-date"}
        need |= {h.lower() for h in self.headers.keys() if h.lower().startswith("x-amz-")}
        missing = sorted(need - set(signed))
        if missing:
            raise S3Error(
                403,
                "AccessDenied",
                f"There were headers present in the request which were not signed: "
                f"{', '.join(missing)}",
            )
        token = self.headers.get("X-Amz-Security-Token")
        if a.session_token is not None and token != a.session_token:
            raise S3Error(403, "InvalidToken",
                          "The provided token is malformed or otherwise invalid.")
        hdrs = {}
        for h in signed:
            vals = self.headers.get_all(h)
            if vals is None:  # AWS: IncompleteSignature (curl 7.88 signs a removed "Expect:")
                raise S3Error(
                    403,
                    "SignatureDoesNotMatch",
                    f"'{h}' is named as a SignedHeader, but it does not exist in the HTTP request",
                )
            hdrs[h] = ",".join(vals)
        bad = [h for h in signed if h in SIGNED_HEADERS_BLACKLIST]
        if bad:  # hop-by-hop headers a proxy may change; botocore's signer leaves them out
            raise S3Error(403, "AccessDenied", f"hop-by-hop headers were signed: {bad}")
        creds = Credentials(a.access_key, a.secret_key, a.session_token)
        signer = S3SigV4Auth(creds, "s3", region)
        req = AWSRequest(method=self.command, url="http://" + hdrs.get("host", "") + self.path,
                         headers=hdrs)
        req.context["timestamp"] = amz_date
        if sha is None:
            # Only with --allow-missing-content-sha256: the hash of the body as sent.
            req.headers["X-Amz-Content-SHA256"] = hashlib.sha256(body).hexdigest()
        canonical = signer.canonical_request(req)
        want = signer.signature(signer.string_to_sign(req, canonical), req)
        if not hmac.compare_digest(want, sig):
            raise S3Error(
                403,
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided. "
                "Check your key and signing method.",
                CanonicalRequest=canonical,
            )
        if sha not in (None, "UNSIGNED-PAYLOAD"):
            if sha.startswith("STREAMING-"):
                raise S3Error(501, "NotImplemented", f"x-amz-content-sha256 '{sha}' is not served")
            if hashlib.sha256(body).hexdigest() != sha.lower():
                raise S3Error(
                    400,
                    "XAmzContentSHA256Mismatch",
                    "The provided 'x-amz-content-sha256' header does not match what was computed.",
                )

    # ---- S3 operations ----
    def bucket_of(self, st, bucket):
        b = st.buckets.get(bucket)
        if b is None:
            raise S3Error(
                404, "NoSuchBucket", "The specified bucket does not exist", BucketName=bucket or ""
            )
        return b

    def verify_checksums(self, body):
        """Checks Content-MD5 and x-amz-checksum-*; returns (algo, value) of the one sent."""
        md5 = self.headers.get("Content-MD5")
        if md5 is not None and base64.b64encode(hashlib.md5(body).digest()).decode() != md5:
            raise S3Error(400, "BadDigest",
                          "The Content-MD5 you specified did not match what we received.")
        found = (None, None)
        for algo in CHECKSUM_ALGOS:
            v = self.headers.get("x-amz-checksum-" + algo)
            if v is None:
                continue
            if checksum(algo, body) != v:
                raise S3Error(
                    400,
                    "BadDigest",
                    f"The {algo.upper()} you specified did not match the calculated checksum.",
                )
            found = (algo, v)
        return found

    def s3(self, st, url, bucket, key, body, fault):
        q = dict(parse_qsl(url.query, keep_blank_values=True))
        m = self.command
        if bucket is None:
            raise S3Error(400, "InvalidRequest", "ListBuckets is not served by this test server")
        if key is None:
            return self.bucket_op(st, bucket, q, fault)
        if m == "PUT" and "uploadId" in q:
            return self.upload_part(st, bucket, key, q, body, fault)
        if m == "PUT":
            if "x-amz-copy-source" in {h.lower() for h in self.headers.keys()}:
                raise S3Error(501, "NotImplemented", "CopyObject is not served by this test server")
            algo, value = self.verify_checksums(body)
            etag = '"' + hashlib.md5(body).hexdigest() + '"'
            with st.lock:
                self.bucket_of(st, bucket)[key] = Obj(body, etag, algo, value)
            hs = [("ETag", etag)]
            if algo:
                hs.append(("x-amz-checksum-" + algo, echo_checksum(algo, value, body, fault)))
            self.send(200, b"", hs, fault)
            return 200
        if m == "POST" and "uploads" in q:
            with st.lock:
                self.bucket_of(st, bucket)
                uid = uuid.uuid4().hex
                algo = self.headers.get("x-amz-checksum-algorithm")
                st.uploads[uid] = {"bucket": bucket, "key": key, "parts": {},
                                   "algo": algo.lower() if algo else None}
            xml = xml_doc("InitiateMultipartUploadResult",
                          [("Bucket", bucket), ("Key", key), ("UploadId", uid)])
            self.send(200, xml, [], fault, content_type="application/xml")
            return 200
        if m == "POST" and "uploadId" in q:
            return self.complete(st, bucket, key, q, body, fault)
        if m == "DELETE" and "uploadId" in q:
            with st.lock:
                self.bucket_of(st, bucket)
                u = st.uploads.get(q["uploadId"])
                if u is None or u["bucket"] != bucket or u["key"] != key:
                    raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.",
                                  UploadId=q["uploadId"])
                del st.uploads[q["uploadId"]]
            self.send(204, b"", [], fault)
            return 204
        if m == "DELETE":
            with st.lock:
                self.bucket_of(st, bucket).pop(key, None)
            self.send(204, b"", [], fault)
            return 204
        if m in ("GET", "HEAD"):
            return self.get(st, bucket, key, fault)
        raise S3Error(405, "MethodNotAllowed", f"{m} is not allowed on an object here")

    def bucket_op(self, st, bucket, q, fault):
        m = self.command
        if m == "PUT":
            with st.lock:
                if bucket in st.buckets:
                    raise S3Error(409, "BucketAlreadyOwnedByYou", "Your previous request to create "
                                  "the named bucket succeeded and you already own it.",
                                  BucketName=bucket)
                st.buckets[bucket] = {}
            self.send(200, b"", [("Location", "/" + bucket)], fault)
            return 200
        if m == "HEAD":
            with st.lock:
                self.bucket_of(st, bucket)
            self.send(200, b"", [], fault)
            return 200
        if m == "DELETE":
            with st.lock:
                if self.bucket_of(st, bucket):
                    raise S3Error(409, "BucketNotEmpty",
                                  "The bucket you tried to delete is not empty")
                del st.buckets[bucket]
            self.send(204, b"", [], fault)
            return 204
        if m == "GET" and "uploads" in q:
            with st.lock:
                self.bucket_of(st, bucket)
                ups = [(uid, u) for uid, u in st.uploads.items() if u["bucket"] == bucket]
            inner = "".join(
                f"<Upload><Key>{xml_escape(u['key'])}</Key><UploadId>{uid}</UploadId></Upload>"
                for uid, u in ups
            )
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult>'
                   f"<Bucket>{xml_escape(bucket)}</Bucket><IsTruncated>false</IsTruncated>{inner}"
                   f"</ListMultipartUploadsResult>").encode()
            self.send(200, xml, [], fault, content_type="application/xml")
            return 200
        raise S3Error(501, "NotImplemented",
                      "this bucket operation is not served by the test server")

    def upload_part(self, st, bucket, key, q, body, fault):
        try:
            n = int(q.get("partNumber", ""))
        except ValueError:
            n = 0
        if not 1 <= n <= 10000:
            raise S3Error(400, "InvalidArgument",
                          "Part number must be an integer between 1 and 10000")
        algo, value = self.verify_checksums(body)
        etag = '"' + hashlib.md5(body).hexdigest() + '"'
        with st.lock:
            self.bucket_of(st, bucket)
            u = st.uploads.get(q["uploadId"])
            if u is None or u["bucket"] != bucket or u["key"] != key:
                raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.",
                              UploadId=q["uploadId"])
            u["parts"][n] = (body, etag, algo, value)
        hs = [("ETag", etag)]
        if algo:
            hs.append(("x-amz-checksum-" + algo, echo_checksum(algo, value, body, fault)))
        self.send(200, b"", hs, fault)
        return 200

    def complete(self, st, bucket, key, q, body, fault):
        import xml.etree.ElementTree as ET

        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            raise S3Error(400, "MalformedXML", "The XML you provided was not well-formed or did "
                          "not validate against our published schema")
        ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        listed = []
        for p in root.findall(ns + "Part"):
            num = p.findtext(ns + "PartNumber")
            etag = p.findtext(ns + "ETag")
            if num is None or etag is None:
                raise S3Error(400, "MalformedXML", "a Part lacks PartNumber or ETag")
            listed.append((int(num), etag.strip()))
        if not listed:
            raise S3Error(400, "MalformedXML", "CompleteMultipartUpload lists no parts")
        if [n for n, _ in listed] != sorted({n for n, _ in listed}):
            raise S3Error(400, "InvalidPartOrder", "The list of parts was not in ascending order.")
        with st.lock:
            self.bucket_of(st, bucket)
            u = st.uploads.get(q["uploadId"])
            if u is None or u["bucket"] != bucket or u["key"] != key:
                raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.",
                              UploadId=q["uploadId"])
            datas = []
            for i, (n, etag) in enumerate(listed):
                part = u["parts"].get(n)
                if part is None or part[1].strip('"') != etag.strip('"'):
                    raise S3Error(400, "InvalidPart",
                                  "One or more of the specified parts could not "
                                  "be found.", PartNumber=n, ETag=etag)
                small = len(part[0]) < 5 * 1024 * 1024 and not st.args.small_parts
                if i + 1 < len(listed) and small:
                    raise S3Error(400, "EntityTooSmall", "Your proposed upload is smaller than the "
                                  "minimum allowed object size.", PartNumber=n)
                datas.append(part[0])
            data = b"".join(datas)
            md5s = b"".join(bytes.fromhex(u["parts"][n][1].strip('"')) for n, _ in listed)
            etag = '"%s-%d"' % (hashlib.md5(md5s).hexdigest(), len(listed))
            algo = u["algo"]
            value = None
            if algo in CHECKSUM_ALGOS and all(u["parts"][n][2] == algo for n, _ in listed):
                raw = b"".join(base64.b64decode(u["parts"][n][3]) for n, _ in listed)
                h = getattr(hashlib, algo, None)
                if h is not None:
                    value = base64.b64encode(h(raw).digest()).decode() + "-%d" % len(listed)
            self.bucket_of(st, bucket)[key] = Obj(data, etag, algo if value else None, value)
            del st.uploads[q["uploadId"]]
        xml = xml_doc("CompleteMultipartUploadResult",
                      [("Bucket", bucket), ("Key", key), ("ETag", etag)])
        self.send(200, xml, [], fault, content_type="application/xml")
        return 200

    def get(self, st, bucket, key, fault):
        with st.lock:
            o = self.bucket_of(st, bucket).get(key)
        if o is None:
            if self.command == "HEAD":
                self.send(404, b"", [], fault)
                return 404
            raise S3Error(404, "NoSuchKey", "The specified key does not exist.", Key=key)
        size = len(o.data)
        rng = self.headers.get("Range")
        start, end, status = 0, size - 1, 200
        if rng is not None:
            r = parse_range(rng, size)
            if r is None:
                raise S3Error(416, "InvalidRange", "The requested range is not satisfiable",
                              RangeRequested=rng, ActualObjectSize=size)
            if r != "ignore":
                start, end = r
                status = 206
        hs = [("ETag", o.etag), ("Accept-Ranges", "bytes"),
              ("Last-Modified", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(o.mtime)))]
        if status == 206:
            hs.append(("Content-Range", f"bytes {start}-{end}/{size}"))
        whole = status == 200
        # S3 sends no checksum with a ranged GET; a "corrupt" rule with "with_checksum" sends
        # the stored one whenever the range is the whole object (the right checksum over a
        # corrupted body).
        if fault and fault["action"] == "corrupt" and fault.get("with_checksum"):
            whole = start == 0 and end == size - 1
        if (o.checksum_algo and whole and
                (self.headers.get("x-amz-checksum-mode") or "").upper() == "ENABLED"):
            hs.append(("x-amz-checksum-" + o.checksum_algo, o.checksum_value))
        if fault and fault["action"] == "bad_checksum":
            algo = fault.get("algo", o.checksum_algo or "crc32")
            hs = [(k, v) for k, v in hs if not k.startswith("x-amz-checksum-") and k != "ETag"]
            wrong = checksum(algo, o.data[start:end + 1] + b"\x00")
            hs += [("x-amz-checksum-" + algo, wrong), ("ETag", '"%s"' % ("0" * 32))]
        self.send(status, o.data[start:end + 1], hs, fault, content_type="binary/octet-stream")
        return status

    # ---- control ----
    def control(self, st, url):
        q = dict(parse_qsl(url.query, keep_blank_values=True))
        body = self.read_body()
        path, m = url.path, self.command

        def js(obj, status=200):
            self.send(status, json.dumps(obj).encode(), content_type="application/json")

        if path == "/__ctl/fault" and m == "POST":
            rules = json.loads(body or b"[]")
            rules = rules if isinstance(rules, list) else [rules]
            ids = []
            with st.lock:
                for r in rules:
                    r.setdefault("count", 1)
                    r.setdefault("action", "status")
                    r["id"] = st.next_rule
                    st.next_rule += 1
                    st.rules.append(r)
                    ids.append(r["id"])
            return js({"ids": ids})
        if path == "/__ctl/reset" and m == "POST":
            with st.lock:
                st.rules.clear()
                st.log.clear()
            return js({})
        if path == "/__ctl/log" and m == "GET":
            with st.lock:
                return js([dict(e) for e in st.log
                           if all(str(e.get(k)) == v for k, v in q.items() if k in e)])
        if path == "/__ctl/uploads" and m == "GET":
            with st.lock:
                ups = [{"bucket": u["bucket"], "key": u["key"], "upload_id": uid,
                        "parts": len(u["parts"])} for uid, u in st.uploads.items()]
            return js(ups)
        if path == "/__ctl/object":
            with st.lock:
                b = st.buckets.get(q.get("bucket"))
                if b is None:
                    return js({"error": "no such bucket"}, 404)
                if m == "PUT":
                    b[q.get("key", "")] = Obj(body, '"' + hashlib.md5(body).hexdigest() + '"')
                    return js({})
                o = b.get(q.get("key", ""))
            if o is None:
                return js({"error": "no such key"}, 404)
            return self.send(200, o.data, content_type="application/octet-stream")
        if path == "/__ctl/bucket":
            with st.lock:
                if m == "POST":
                    st.buckets.setdefault(q["name"], {})
                elif m == "DELETE":
                    st.buckets.pop(q["name"], None)
            return js({})
        if path == "/__ctl/config" and m == "POST":
            cfg = json.loads(body or b"{}")
            with st.lock:
                for k in ("access_key", "secret_key", "session_token", "region"):
                    if k in cfg:
                        setattr(st.args, k, cfg[k])
            return js({})
        if path == "/__ctl/exit" and m == "POST":
            js({})
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return None
        return js({"error": f"no control {m} {path}"}, 404)


def parse_range(h, size):
    """(start, end) for a satisfiable single range, None for 416, "ignore" for what S3 ignores."""
    if not h.startswith("bytes=") or "," in h:
        return "ignore"
    a, sep, b = h[6:].strip().partition("-")
    if not sep:
        return "ignore"
    try:
        if a == "":
            n = int(b)
            if n <= 0 or size == 0:
                return None
            return max(0, size - n), size - 1
        start = int(a)
        end = int(b) if b != "" else size - 1
    except ValueError:
        return "ignore"
    if start < 0 or end < start:
        return "ignore"
    if start >= size:
        return None
    return start, min(end, size - 1)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 128

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            return  # a client that refused the certificate (the TLS tests do, on purpose)
        super().handle_error(request, client_address)


def make_certs(d, names):
    """A test CA, a server certificate for names (DNS names and IPs) signed by it, and an
    unrelated CA, into directory d (openssl's command line; EC P-256 keys, quick to make)."""
    if shutil.which("openssl") is None:
        print("SKIP: the openssl command is missing (apt-get install openssl)", file=sys.stderr)
        sys.exit(77)
    os.makedirs(d, exist_ok=True)

    def run(*args):
        subprocess.run(["openssl", *args], check=True, cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_ext = ["-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
    for ca in ("ca", "other-ca"):
        run("req", "-x509", *key, "-keyout", ca + ".key", "-out", ca + ".pem", "-days", "2",
            "-subj", "/CN=ixl S3 test " + ca, *ca_ext)
    san = ",".join(("IP:" if n.replace(".", "").isdigit() else "DNS:") + n for n in names)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
    run("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext")
    for f in ("server.csr", "server.ext", "ca.srl", "ca.key", "other-ca.key"):
        try:
            os.unlink(os.path.join(d, f))
        except OSError:
            pass


def tls_server(args, state):
    """The same S3 over TLS on another ephemeral port (the handshake runs in the request's
    thread, so a client that never finishes it blocks nobody)."""
    d = args.tls_dir
    names = ["localhost", "127.0.0.1"] + [b + "." + args.vhost_suffix for b in args.bucket]
    make_certs(d, names)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
    srv = Server((args.host, 0), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    srv.state = state
    return srv


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", "--address", default="127.0.0.1")
    p.add_argument("--directory", help="accepted for s3rver's command line; data stays in memory")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--access-key", default="ixltestkey")
    p.add_argument("--secret-key", default="ixltestsecret")
    p.add_argument("--session-token")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--any-region", action="store_true",
                   help="accept requests signed for any region (s3rver does)")
    p.add_argument("--bucket", action="append", default=[])
    p.add_argument("--vhost-suffix", default="localhost")
    p.add_argument("--allow-missing-content-sha256", action="store_true",
                   help="sign-check requests without x-amz-content-sha256 with the body's hash")
    p.add_argument("--small-parts", action="store_true",
                   help="accept multipart parts under S3's 5 MiB minimum")
    p.add_argument("--tls-dir", help="also serve HTTPS: certificates made into this directory")
    args = p.parse_args()
    srv = Server((args.host, args.port), Handler)
    srv.state = State(args)
    port = srv.server_address[1]
    tls = tls_server(args, srv.state) if args.tls_dir else None
    lines = f"{port}\n" + (f"{tls.server_address[1]}\n" if tls else "")
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(lines)
        os.rename(tmp, args.port_file)
    if tls:
        print(f"TLS {tls.server_address[1]}", flush=True)
        threading.Thread(target=tls.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()
    print(f"PORT {port}\nixl S3 test server listening on {args.host}:{port}", flush=True)

    def stop(*_):
        threading.Thread(target=srv.shutdown).start()
        if tls:
            threading.Thread(target=tls.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    srv.server_close()


if __name__ == "__main__":
    main()
