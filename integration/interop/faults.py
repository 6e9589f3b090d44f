#!/usr/bin/env python3
"""Faults on demand from a test suite in another language, with nothing
but the standard library: the admin API's /v1/faults over HTTP.

    faults.py ADMIN_URL add '{"kind": "error", "node": 1, "api_key": 0, "error_code": 29, "count": 1}'
    faults.py ADMIN_URL list
    faults.py ADMIN_URL clear

Prints the JSON answer; exits 1 on an HTTP error. TXNCOORD_ADMIN_TOKEN, when
set, is sent as the bearer token (up --secure).
"""
import json
import os
import sys
import urllib.error
import urllib.request


def call(admin, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(admin.rstrip("/") + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    token = os.environ.get("TXNCOORD_ADMIN_TOKEN")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        sys.exit("faults.py: %s %s: HTTP %d %s" % (method, path, e.code, e.read().decode().strip()))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    admin, cmd = sys.argv[1], sys.argv[2]
    if cmd == "add":
        out = call(admin, "POST", "/v1/faults", json.loads(sys.argv[3]))
    elif cmd == "list":
        out = call(admin, "GET", "/v1/faults")
    elif cmd == "clear":
        out = call(admin, "DELETE", "/v1/faults")
    else:
        sys.exit(__doc__)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
