"""Top functions of a columnar store, computed by DuckDB from the Parquet files alone.

Usage: duckdb_top.py COLUMNAR_DIR TYPE
Prints one JSON object: {"total": …, "rows": [[function, file, self, total], …]} for profiles
of TYPE (cpu, wall, alloc, lock), the value being the type's amount (`value`). Self is the
leaf's value; total counts a function once per stack however often it recurses, as
`otelprof top` does. Stacks are joined on stack_id, each id taken once (a partition may hold
an id in two files only if two writers raced; rows are identical then).
"""
import sys

import duckdb

root, ty = sys.argv[1], sys.argv[2]
if ty not in ("cpu", "wall", "alloc", "lock"):
    sys.exit(f"unknown type {ty!r}")
con = duckdb.connect()
samples = f"read_parquet('{root}/*/*/samples-*.parquet', hive_partitioning = true)"
stacks = f"read_parquet('{root}/*/*/stacks-*.parquet', hive_partitioning = true)"
con.execute(f"""
create temp view s as
  select service, hour, stack_id, sum(value) as v
  from {samples} where type = '{ty}' and value is not null group by all
""")
con.execute(f"""
create temp view k as
  select distinct on (service, hour, stack_id) service, hour, stack_id, function, file
  from {stacks}
""")
total = con.execute("select coalesce(sum(v), 0) from s").fetchone()[0]
# Frame names as the engine names them: an empty name is <unknown>.
rows = con.execute("""
with frames as (
  select s.v, unnest(k.function) as f, unnest(k.file) as file, k.stack_id, s.service, s.hour,
         generate_subscripts(k.function, 1) as i
  from s join k using (service, hour, stack_id)
),
named as (select v, case when f = '' then '<unknown>' else f end as f, file, stack_id, service, hour, i from frames),
self as (select f, sum(v) as self from named where i = 1 group by f),
total as (
  select f, sum(v) as total from (
    select distinct service, hour, stack_id, f, v from named
  ) group by f
),
files as (select f, min(file) filter (where file <> '') as file from named group by f)
select total.f, coalesce(files.file, ''), coalesce(self.self, 0), total.total
from total left join self using (f) left join files using (f)
order by 3 desc, 4 desc, 1
""").fetchall()
# Tab-separated (frame names hold brackets and commas, never tabs): the total, then a row a
# line.
print(f"total\t{total}")
for name, file, self_value, total_value in rows:
    print(f"{name}\t{file}\t{self_value}\t{total_value}")
