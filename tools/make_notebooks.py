"""Writes the tutorial notebooks (outputs stripped). Run: python tools/make_notebooks.py"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).resolve().parent.parent / "notebooks"


def md(text: str) -> nbf.NotebookNode:
    return nbf.v4.new_markdown_cell(text.strip())


def code(text: str, *, raises: bool = False) -> nbf.NotebookNode:
    cell = nbf.v4.new_code_cell(text.strip())
    if raises:
        cell.metadata["tags"] = ["raises-exception"]
    return cell


def write(name: str, cells: list[nbf.NotebookNode]) -> None:
    nb = nbf.v4.new_notebook()
    nb.cells = cells
    for i, cell in enumerate(cells):  # stable ids: regenerating an unchanged notebook changes nothing
        cell["id"] = f"cell-{i:02d}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbf.write(nb, HERE / name)


write(
    "01_quickstart.ipynb",
    [
        md("""
# Quickstart: connect, send, peek, receive, settle

**You will learn** how to point sbnotebook at Service Bus (the embedded emulator by default, Azure by
connection string or Entra ID), send messages with every outcome awaited, look at them without
touching them, and receive and settle them.
"""),
        code("%load_ext sbnotebook"),
        md("""
With nothing configured, `%sb_connect` starts the embedded emulator (a real AMQP broker that the
official SDK talks to exactly as it talks to Azure). For Azure use one of:

```python
%sb_connect $conn_str                                      # a connection string held in a variable
%sb_connect --namespace contoso.servicebus.windows.net     # Entra ID (DefaultAzureCredential)
%sb_connect --secret my-scope/servicebus                   # a Databricks secret scope
```
The key is never printed. `%sb_connect` opens one live connection (kept open, its links reused), so
every later command costs about one round trip; every magic and panel uses it."""),
        code("%sb_connect"),
        code("%sb_entities"),
        md(
            "Send JSON lines: every send is awaited, at most 10 operations in flight. The result is a `Report`: one outcome per message."
        ),
        code("""
%%sb_send orders
{"order": 1, "customer": "c-7", "total": 120.0}
{"order": 2, "customer": "c-8", "total": 9.5}
{"order": 3, "customer": "c-7", "total": 42.0}
"""),
        md("Peek: non-destructive (no lock, no delivery counted). The result is a DataFrame."),
        code("""
df = %sb_peek orders --json
df[["sequence_number", "delivery_count", "body.customer", "body.total"]]
"""),
        code("""%sb_peek orders --where 'body.total > 40'"""),
        md("Receive in peek-lock: the messages are locked for you (and the locks renewed) until you settle."),
        code("batch = %sb_receive orders -n 3\nbatch"),
        code("%sb_settle complete 0,1"),
        code("""%sb_settle dead-letter 2 --reason bad-total --description "needs review" """),
        code("%sb_entities"),
        md("The same from Python, through the settlement library that everything uses:"),
        code("""
from sbnotebook import core

conn = core.connect()                  # the same live connection %sb_connect opened
report = core.send("orders", [{"order": i} for i in range(10)], connection=conn)
print(report)                          # every operation returns a Report; its summary line
with core.receive("orders", count=10, connection=conn) as b:
    done = b.complete()
print(done)
assert report.ok and done.count("completed") == 10
done.to_pandas().head(3)               # one row per message: message id, sequence number, outcome, error
"""),
        md("""
**Try next:** `%sb_browse orders` for the message browser, `%sb_dlq orders` for the dead-letter
triage panel, and the *Settlement in depth* notebook."""),
    ],
)

write(
    "02_settlement_in_depth.ipynb",
    [
        md("""
# Settlement in depth

**You will learn** peek-lock vs receive-and-delete, lock duration and renewal, what a lost lock
looks like, how abandoning until `MaxDeliveryCount` dead-letters a message, and duplicate detection
by message id. The `retries` queue has a 5 s lock and `MaxDeliveryCount` 3; `dedup` detects duplicates.
"""),
        code("""
import time
from sbnotebook import core

core.send("retries", ["work item"])
"""),
        md(
            "**Peek-lock**: the message stays in the queue, locked, until you settle it. Auto-renewal keeps the lock while you look:"
        ),
        code("""
with core.receive("retries", count=1) as batch:
    print("lock left:", [round(s, 1) for s in batch.seconds_left()])
    time.sleep(6)                       # longer than the 5 s lock: renewal keeps it
    print(batch.complete())
"""),
        md(
            "**A lost lock**: with renewal off, the lock lapses; settling then fails and the message is back for someone else."
        ),
        code("""
core.send("retries", ["slow item"])
batch = core.receive("retries", count=1, auto_renew=False)
time.sleep(6)
print(batch.complete())                 # outcome 'lock_lost'
batch.close()
with core.receive("retries", count=1, wait=10) as again:   # it is back, one delivery counted
    print("redelivered, delivery count", again.records[0]["delivery_count"], again.complete())
"""),
        md(
            "**Abandon until MaxDeliveryCount**: each abandon counts a delivery; the third one moves the message to the DLQ."
        ),
        code("""
core.send("retries", ["poison"])
for attempt in range(3):
    with core.receive("retries", count=1, wait=10) as b:
        print("delivery", b.records[0]["delivery_count"], b.abandon())
dlq = core.peek("retries/$deadletterqueue").to_pandas()
dlq[["body_text", "delivery_count", "dead_letter_reason"]]
"""),
        code("""assert dlq["dead_letter_reason"].tolist() == ["MaxDeliveryCountExceeded"]"""),
        md(
            "**Receive-and-delete** removes on delivery (at-most-once): if your work fails afterwards, the message is gone."
        ),
        code("""
core.send("results", ["gone on delivery"])
with core.receive("results", mode="receive-and-delete") as b:
    print(len(b), "received;", core.counts("results").active, "left in the queue")
"""),
        md("**Duplicate detection** drops a second message with the same id inside the window:"),
        code("""
core.send("dedup", [{"body": "first", "message_id": "order-42"}, {"body": "again", "message_id": "order-42"}])
print(core.counts("dedup").active)
assert core.counts("dedup").active == 1
"""),
        md("**Try next:** the *Deferral* notebook, or `%sb_receive retries --panel` to watch lock countdowns."),
    ],
)

write(
    "03_deferral_four_ways.ipynb",
    [
        md("""
# Deferral, the four ways

**You will learn** the four ways to say "not now" to a message: let the lock lapse, wait then
abandon, defer and fetch by sequence number, and resubmit a scheduled clone with a resubmit count.
"""),
        code("""
import datetime as dt
import time
from sbnotebook import core
from sbnotebook.core import deferral

core.send("retries", [f"job {i}" for i in range(4)])
batch = core.receive("retries", count=4)
"""),
        md(
            "1. **Let the lock lapse**: do nothing; after the lock duration the message comes back (a delivery is counted)."
        ),
        code("print(deferral.let_lock_lapse(batch, [0]))"),
        md("2. **Wait, then abandon**: give it back after a delay of your choice."),
        code("later = deferral.wait_then_abandon(batch, [1], seconds=1)\nprint(later.result())"),
        md(
            "3. **Defer** and fetch by sequence number when you are ready (deferred messages never come back on their own)."
        ),
        code("""
seq = batch.records[2]["sequence_number"]
print(batch.defer([2]))
with core.receive_deferred("retries", [seq]) as again:
    print(again.records[0]["body_text"], again.complete())
"""),
        md("4. **Resubmit a scheduled clone** with a resubmit count; past the limit it is dead-lettered instead."),
        code("""
print(deferral.resubmit_scheduled(batch, [3], delay=dt.timedelta(seconds=2), max_resubmits=3))
print(core.peek("retries").to_pandas()[["body_text", "state", "scheduled_enqueue_time"]])
batch.close()
"""),
        md("**Try next:** `%sb_peek retries` shows deferred and scheduled messages with their `state`."),
    ],
)

write(
    "04_dead_letter_triage.ipynb",
    [
        md("""
# Dead-letter triage

**You will learn** to find why messages failed, repair a group in bulk, resubmit them (copy first,
then complete, so nothing can be lost), and verify the counts.
"""),
        code("""
import json
from sbnotebook import core

orders = [{"order": i, "currency": "usd" if i % 3 else "EURO"} for i in range(12)]
core.send("orders", orders)
with core.receive("orders", count=12) as batch:
    for i, rec in enumerate(batch.records):
        body = json.loads(rec["body_text"])
        if body["currency"] == "EURO":
            batch.dead_letter([i], reason="bad-currency", description="EURO is not ISO 4217")
        elif body["order"] % 4 == 1:
            batch.dead_letter([i], reason="timeout", description="downstream timed out")
    batch.complete()
before = core.counts("orders")
before
"""),
        code("%load_ext sbnotebook"),
        code("%sb_dlq orders --summary"),
        md("The triage panel groups by reason with a chart; here we drive it from code (the buttons do the same)."),
        code("""
from sbnotebook.notebook.widgets import TriagePanel

panel = TriagePanel("orders")
panel
"""),
        code("""
panel.select_group("bad-currency")
panel.patch.value = '{"currency": "EUR"}'      # a JSON merge patch for every selected body
print(panel.ask_resubmit())                      # nothing moves until confirmed
report = panel.confirm("resubmit")
report
"""),
        md("Verify: the repaired messages are back in `orders`, the rest still in the DLQ, nothing lost."),
        code("""
after = core.counts("orders")
print(before.active, before.dead_letter, "->", after.active, after.dead_letter)
assert after.active + after.dead_letter == before.active + before.dead_letter
assert report.count("resubmitted") == 4 and report.ok
print(core.peek("orders").to_pandas()["body_text"].tolist())
"""),
        md(
            "**Try next:** `panel.edit = lambda r: ...` for a Python edit, or resubmit to another queue with `panel.ask_resubmit(target='results')`."
        ),
    ],
)

write(
    "05_sending_fast_and_safely.ipynb",
    [
        md("""
# Sending fast and safely

**You will learn** why a plain loop is slow over a real network, how settled pipelined sends and
batches make it fast without fire-and-forget, and that memory stays bounded. An emulator with a
simulated 70 ms round trip stands in for a distant namespace.
"""),
        code("""
import time
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from sbnotebook import core
from sbnotebook.emulator import Emulator
from sbnotebook.notebook import plots

far = Emulator(latency=0.070).start()          # every reply 70 ms late
conn = core.connect(far.connection_string)     # one live connection to it, links kept open
N = 60
"""),
        md("**Plain loop**: one message, wait for its outcome, next. N round trips."),
        code("""
with ServiceBusClient.from_connection_string(far.connection_string) as c, c.get_queue_sender("results") as s:
    t = time.perf_counter()
    for i in range(N):
        s.send_messages(ServiceBusMessage(f"plain {i}"))
    plain_rate = N / (time.perf_counter() - t)
print(f"plain loop: {plain_rate:.0f} msg/s")
"""),
        md("**Settled, pipelined**: up to 10 sends in flight, each outcome still awaited and reported."),
        code("""
pipelined = core.send("results", [f"piped {i}" for i in range(N)], batch=False, max_in_flight=10, connection=conn)
batched = core.send("results", [f"batched {i}" for i in range(N)], connection=conn)
print(pipelined, batched, sep="\\n")
plots.send_throughput({"plain loop": plain_rate, "pipelined (10 in flight)": pipelined, "batched": batched})
"""),
        code("""
assert pipelined.ok and batched.ok
assert pipelined.stats["peak_in_flight"] <= 10
assert pipelined.rate > plain_rate
"""),
        md("""
**Why not fire-and-forget?** A send you do not await can fail (throttling, a full queue) without
anyone knowing; the report would claim success. Here a refused send is reported with its
condition and tracking id:"""),
        code("""
far.reject_sends("results", 1, "quota-exceeded")
report = core.send("results", ["will be refused", "fine"], batch=False, max_in_flight=1, connection=conn)
print(report)
report.to_pandas()
"""),
        md(
            "**Bounded memory**: input is streamed; a generator of any length never has more than `max_in_flight` sends outstanding."
        ),
        code("""
report = core.send("results", (f"gen {i}" for i in range(200)), max_in_flight=4, connection=conn)
print(report, "| peak in flight:", report.stats["peak_in_flight"])
plots.send_latency(report)
"""),
        code("conn.close()\nfar.stop()"),
        md("**Try next:** `benchmarks/send_pipelining.py` measures the same at scale."),
    ],
)

write(
    "06_spark.ipynb",
    [
        md("""
# Spark: Service Bus as a data source

**You will learn** to load an entity into a Spark DataFrame (a non-destructive snapshot), analyse it,
write results back with settled sends, and run the two-phase `defer` mode end to end.
"""),
        code("""
from pyspark.sql import functions as F
from sbnotebook import core
from sbnotebook import spark as sbspark

spark = sbspark.local_session()        # on Databricks: sbspark.register(spark)
core.send("orders", [{"order": i, "customer": f"c-{i % 5}", "total": i * 1.5} for i in range(500)])
"""),
        code("""
df = spark.read.format("servicebus").option("entity", "orders").option("numPartitions", 2).load()
print(df.count(), "messages; still in the queue:", core.counts("orders").active)
"""),
        code("""
orders = df.select(F.from_json("body_text", "order int, customer string, total double").alias("o")).select("o.*")
per_customer = orders.groupBy("customer").agg(F.count("*").alias("orders"), F.sum("total").alias("revenue"))
per_customer.orderBy("customer").show()
"""),
        md(
            "Write results back: each task sends through the settlement library (at most `max_in_flight` in flight, retries, one Report)."
        ),
        code("""
summary = sbspark.write(per_customer.select(F.to_json(F.struct("*")).alias("body")), "results", max_in_flight=8)
print(summary)
assert summary.count("sent") == 5
"""),
        md("**Two-phase `defer` mode**: receive and defer, do the work, settle only after it succeeded."),
        code("""
deferred = spark.read.format("servicebus").option("entity", "orders").option("mode", "defer") \\
    .option("maxMessages", 500).load().cache()
print(deferred.count(), "deferred")
work_ok = deferred.where("body_text is not null").count() == 500      # stands for your real work
report = sbspark.settle(deferred, "complete") if work_ok else sbspark.release(deferred)
print(report, "| left in orders:", core.counts("orders").active)
"""),
        code("spark.stop()"),
        md("**Try next:** docs/spark.md for every option and guarantee; `mode=receive-and-delete` for throwaway data."),
    ],
)

write(
    "07_processing_with_a_policy.ipynb",
    [
        md("""
# Processing with a settlement policy

**You will learn** to process messages with a handler whose verdicts (done, skip, retry, stop,
dead-letter) become settlements, only after the work is done.
"""),
        code("""
import json
from sbnotebook import core
from sbnotebook.core import DeadLetter, Done, Retry, Skip

core.send("orders", [{"order": i, "total": t} for i, t in enumerate([10, -5, 0, 99, 7])])

def handle(record):
    body = json.loads(record["body_text"])
    if body["total"] < 0:
        return DeadLetter("negative-total", f"order {body['order']} has total {body['total']}")
    if body["total"] == 0:
        return Skip()                      # nothing to do: completed
    if body["total"] > 50 and record["delivery_count"] < 2:
        return Retry()                     # abandoned: comes back
    return Done()

report = core.process("orders", handle, max_messages=20)
report
"""),
        code("""
print(core.counts("orders"))
core.peek("orders/$deadletterqueue").to_pandas()[["body_text", "dead_letter_reason"]]
"""),
        md(
            "**Try next:** pass `policy=core.Policy(...)` to route dead letters to another queue, or raise in the handler to see the message abandoned."
        ),
    ],
)
