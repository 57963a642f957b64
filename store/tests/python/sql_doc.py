"""Runs the queries of docs/sql.md on a store with DuckDB or Spark, in one session.

Usage: sql_doc.py duckdb|spark|spark-hive DOC STORE QUERY[:NAME=VALUE,...] ...
Runs the doc's setup block of the engine (`setup`, `spark_setup`; for spark-hive the Hive
DDL `hive_tables` in a Derby metastore of its own, then `spark_hive_views`), with the doc's
store path (/var/otelprof, or the DDL's bucket location) replaced by STORE, then each QUERY
block with its $NAME parameters bound (Spark: as :NAME). Prints `== QUERY`, then its rows tab-separated, one a line (NULL as the
empty string).
"""
import os
import re
import sys
import tempfile

DOC_STORE = "/var/otelprof"
DOC_LOCATION = "s3://bucket/prefix"


def blocks(doc):
    """The doc's sql blocks by name (their first line is `-- NAME`)."""
    out = {}
    for body in re.findall(r"```sql\n(.*?)```", doc, re.S):
        first, _, rest = body.partition("\n")
        out[first.removeprefix("-- ").strip()] = rest
    return out


def statements(text):
    return [s for s in text.split(";") if s.strip()]


def duckdb_session(setup):
    import duckdb

    con = duckdb.connect()
    for s in statements(setup):
        con.execute(s)
    return lambda sql, params: con.execute(sql, params or None).fetchall()


def spark_session(setup, metastore=None):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if metastore:
        builder = (builder.enableHiveSupport()
                   .config("spark.sql.warehouse.dir", f"{metastore}/warehouse")
                   .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                           f"jdbc:derby:;databaseName={metastore}/metastore_db;create=true"))
    spark = (builder.master("local[2]").appName("otelprof-sql-doc")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             # Hour directories stay text, as the other engines read them.
             .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for s in statements(setup):
        spark.sql(s)

    def run(sql, params):
        sql = re.sub(r"\$(\w+)", r":\1", sql).rstrip().rstrip(";")
        return [tuple(r) for r in spark.sql(sql, args=params or None).collect()]

    return run


def main():
    engine, doc_path, store = sys.argv[1:4]
    with open(doc_path, encoding="utf-8") as f:
        sql = blocks(f.read())
    if engine == "duckdb":
        run = duckdb_session(sql["setup"].replace(DOC_STORE, store))
    elif engine == "spark":
        run = spark_session(sql["spark_setup"].replace(DOC_STORE, store))
    elif engine == "spark-hive":
        setup = sql["hive_tables"].replace(DOC_LOCATION, f"file://{store}") + sql["spark_hive_views"]
        metastore = tempfile.TemporaryDirectory(prefix="otelprof-metastore-")
        # Derby writes its log into the working directory.
        os.chdir(metastore.name)
        run = spark_session(setup, metastore=metastore.name)
    else:
        sys.exit(f"unknown engine {engine!r}")
    for arg in sys.argv[4:]:
        name, _, binds = arg.partition(":")
        params = dict(b.split("=", 1) for b in binds.split(",") if b)
        print(f"== {name}")
        for row in run(sql[name], params):
            print("\t".join("" if v is None else str(v) for v in row))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
