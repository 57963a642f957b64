"""Runs a ClickHouse query of docs/sql.md with chDB (PyPI `chdb`, ClickHouse's engine) on a
store's columnar files served from an S3 API: moto's server (PyPI `moto[server]`), started
here in this process on a free loopback port, and gone with it.

Usage: chdb_s3.py DOC COLUMNAR_DIR QUERY
Uploads COLUMNAR_DIR into a bucket, points the doc's bucket URL at it, and prints the rows
tab-separated, one a line.
"""
import os
import re
import sys

import boto3
import chdb
from moto.server import ThreadedMotoServer

DOC_URL = "https://my-bucket.s3.amazonaws.com/prefix"


def main():
    doc_path, columnar, query = sys.argv[1:4]
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    sql = None
    for body in re.findall(r"```sql\n(.*?)```", doc, re.S):
        first, _, rest = body.partition("\n")
        if first.removeprefix("-- ").strip() == query:
            sql = rest
    if sql is None:
        sys.exit(f"no query {query!r} in {doc_path}")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                          aws_secret_access_key="test", region_name="us-east-1")
        s3.create_bucket(Bucket="store")
        for root, _, files in os.walk(columnar):
            for name in files:
                path = os.path.join(root, name)
                key = "fleet/columnar/" + os.path.relpath(path, columnar)
                s3.upload_file(path, "store", key)
        sql = sql.replace(DOC_URL, f"{endpoint}/store/fleet")
        sql = sql.replace("'Parquet')", "'test', 'test', 'Parquet')")
        print(chdb.query(sql, "TSV"), end="")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
