"""Run by an old boto3 (botocore < 1.34.90 speaks SQS's query protocol): every P0 action, printed as JSON."""

import json
import sys

import boto3
import botocore
from botocore.exceptions import ClientError

base, name = sys.argv[1], sys.argv[2]
sqs = boto3.client(
    "sqs",
    endpoint_url=base,
    region_name="us-east-1",
    aws_access_key_id="AKIDANYTHING",
    aws_secret_access_key="anything",
)
out = {"botocore": botocore.__version__, "protocol": sqs.meta.service_model.protocol}
url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "40"})["QueueUrl"]
out["url"] = url
attributes = {
    "trace": {"DataType": "String", "StringValue": "a & <b> ✓"},
    "count": {"DataType": "Number.int", "StringValue": "42"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff<"},
}
sent = sqs.send_message(QueueUrl=url, MessageBody="hello", MessageAttributes=attributes)
out["sent"] = {k: v for k, v in sent.items() if k.startswith("MD5")}
batch = sqs.send_message_batch(
    QueueUrl=url,
    Entries=[
        {"Id": "a", "MessageBody": "a & <b>", "MessageAttributes": {"trace": attributes["trace"]}},
        {"Id": "b", "MessageBody": "x", "DelaySeconds": 901},
    ],
)
out["batch"] = {
    "ok": [e["Id"] for e in batch.get("Successful", [])],
    "failed": [(e["Id"], e["Code"]) for e in batch.get("Failed", [])],
    "md5": [e.get("MD5OfMessageAttributes") for e in batch.get("Successful", [])],
}
got = sqs.receive_message(
    QueueUrl=url,
    MaxNumberOfMessages=10,
    WaitTimeSeconds=1,
    AttributeNames=["All"],
    MessageAttributeNames=["All"],
)
out["bodies"] = sorted(m["Body"] for m in got["Messages"])
out["received"] = {
    m["Body"]: [
        {
            n: {**v, "BinaryValue": v["BinaryValue"].hex()} if "BinaryValue" in v else v
            for n, v in m["MessageAttributes"].items()
        },
        m["MD5OfMessageAttributes"],
    ]
    for m in got["Messages"]
}
out["counts"] = sorted(m["Attributes"]["ApproximateReceiveCount"] for m in got["Messages"])
first = got["Messages"][0]
sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=100)
deleted = sqs.delete_message_batch(
    QueueUrl=url,
    Entries=[{"Id": f"m{n}", "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(got["Messages"])],
)
out["deleted"] = sorted(e["Id"] for e in deleted["Successful"])
out["attributes"] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
out["listed"] = sqs.list_queues(QueueNamePrefix=name)["QueueUrls"]
out["errors"] = {}
for what, call in {
    "GetQueueUrl": lambda: sqs.get_queue_url(QueueName="nope-" + name),
    "DeleteMessage": lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage"),
    "SendMessage": lambda: sqs.send_message(
        QueueUrl=url, MessageBody="x", MessageAttributes={"AWS.k": {"DataType": "String", "StringValue": "v"}}
    ),
    "AddPermission": lambda: [  # the label twice: the second is refused
        sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=["123456789012"], Actions=["SendMessage"])
        for _ in range(2)
    ],
}.items():
    try:
        call()
    except ClientError as exc:
        out["errors"][what] = [
            exc.response["Error"]["Code"],
            exc.response["ResponseMetadata"]["HTTPStatusCode"],
        ]
sqs.delete_queue(QueueUrl=url)
print(json.dumps(out))
