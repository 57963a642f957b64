"""Runs the ClickHouse queries of docs/sql.md with chDB (PyPI `chdb`, ClickHouse's engine),
in one session, on a store's columnar files served from an S3 API: moto's server (PyPI
`moto[server]`), started here in this process on a free loopback port, and gone with it.

Usage: chdb_s3.py DOC COLUMNAR_DIR QUERY[:NAME=VALUE,...] ...
Uploads COLUMNAR_DIR into a bucket, runs the doc's `clickhouse_setup` block with its bucket
URL pointed at it, then each QUERY block (the DuckDB ones: ClickHouse runs them unchanged)
with its $NAME parameters bound as ClickHouse query parameters ({NAME:String}). Prints
`== QUERY`, then its rows tab-separated, one a line.
"""
import os
import re
import sys
import tempfile

import boto3
from chdb import session
from moto.server import ThreadedMotoServer

DOC_URL = "https://my-bucket.s3.amazonaws.com/prefix"


def blocks(doc):
    """The doc's sql blocks by name (their first line is `-- NAME`)."""
    out = {}
    for body in re.findall(r"```sql\n(.*?)```", doc, re.S):
        first, _, rest = body.partition("\n")
        out[first.removeprefix("-- ").strip()] = rest
    return out


def statements(text):
    return [s for s in text.split(";") if s.strip()]


def upload(s3, columnar):
    s3.create_bucket(Bucket="store")
    for root, _, files in os.walk(columnar):
        for name in files:
            path = os.path.join(root, name)
            s3.upload_file(path, "store", "fleet/columnar/" + os.path.relpath(path, columnar))


def main():
    doc_path, columnar = sys.argv[1:3]
    with open(doc_path, encoding="utf-8") as f:
        sql = blocks(f.read())
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        upload(boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                            aws_secret_access_key="test", region_name="us-east-1"), columnar)
        with tempfile.TemporaryDirectory() as data:
            sess = session.Session(data)
            setup = sql["clickhouse_setup"].replace(DOC_URL, f"{endpoint}/store/fleet")
            setup = setup.replace("'Parquet')", "'test', 'test', 'Parquet')")
            for s in statements(setup):
                sess.query(s)
            for arg in sys.argv[3:]:
                name, _, binds = arg.partition(":")
                params = dict(b.split("=", 1) for b in binds.split(",") if b)
                query = re.sub(r"\$(\w+)", r"{\1:String}", sql[name]).rstrip().rstrip(";")
                print(f"== {name}")
                print(sess.query(query, "TSV", params=params or None), end="")
            sess.close()
    finally:
        server.stop()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
