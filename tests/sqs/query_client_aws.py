"""Run by an old boto3 (botocore 1.31.80 speaks SQS's query protocol): issue 34's behaviours of
Amazon SQS through a real query-protocol client, printed as JSON for tests/sqs/test_query_client.py.
FIFO group runs and ReceiveRequestAttemptId, attribute values, the attributes Terraform and the CDK
set, system attributes on receive, permissions, STS, a bare queue name as QueueUrl, empty answers,
MessageAttributeNames' wildcards, and errors with their words."""

import json
import sys

import boto3
import botocore
from botocore.exceptions import ClientError

base, name = sys.argv[1], sys.argv[2]
credentials = {"aws_access_key_id": "AKIDANYTHING", "aws_secret_access_key": "anything"}
sqs = boto3.client("sqs", endpoint_url=base, region_name="us-east-1", **credentials)
sts = boto3.client("sts", endpoint_url=base, region_name="us-east-1", **credentials)
out = {"botocore": botocore.__version__, "protocol": sqs.meta.service_model.protocol}
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def refusal(call):
    """[Code, Message, status] of a call that must fail."""
    try:
        call()
    except ClientError as exc:
        error = exc.response["Error"]
        return [error["Code"], error["Message"], exc.response["ResponseMetadata"]["HTTPStatusCode"]]
    return None


# --- FIFO: booleans in any case, group runs, a receive retried, system attributes ------------------
fifo = sqs.create_queue(
    QueueName=f"{name}.fifo",
    Attributes={"FifoQueue": "True", "ContentBasedDeduplication": "TRUE", "VisibilityTimeout": "30"},
)["QueueUrl"]
kept = sqs.get_queue_attributes(QueueUrl=fifo, AttributeNames=["FifoQueue", "ContentBasedDeduplication"])
out["fifo_booleans"] = kept["Attributes"]
for group, body in (("g1", "a1"), ("g2", "b1"), ("g1", "a2"), ("g2", "b2")):
    sqs.send_message(
        QueueUrl=fifo,
        MessageBody=body,
        MessageGroupId=group,
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}},
    )
first = sqs.receive_message(
    QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"], ReceiveRequestAttemptId="attempt-1"
)["Messages"]
again = sqs.receive_message(
    QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"], ReceiveRequestAttemptId="attempt-1"
)["Messages"]
out["fifo_bodies"] = [m["Body"] for m in first]
out["fifo_retry_same"] = [(m["MessageId"], m["ReceiptHandle"]) for m in first] == [
    (m["MessageId"], m["ReceiptHandle"]) for m in again
]
out["fifo_system"] = sorted(first[0]["Attributes"])
out["fifo_trace"] = first[0]["Attributes"]["AWSTraceHeader"]
out["fifo_group"] = [m["Attributes"]["MessageGroupId"] for m in first]
numbers = {}
for m in first:
    numbers.setdefault(m["Attributes"]["MessageGroupId"], []).append(int(m["Attributes"]["SequenceNumber"]))
out["fifo_numbers_rise_in_each_group"] = all(n == sorted(n) for n in numbers.values())
only = sqs.receive_message(QueueUrl=fifo, AttributeNames=["SequenceNumber"], VisibilityTimeout=0)
out["fifo_nothing_while_held"] = "Messages" not in only  # every group's run is held by the first receive
for m in first:
    sqs.change_message_visibility(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
asked = sqs.receive_message(QueueUrl=fifo, AttributeNames=["SequenceNumber"], VisibilityTimeout=0)["Messages"]
out["asked_sequence_only"] = sorted(asked[0]["Attributes"])
plain = sqs.receive_message(QueueUrl=fifo, VisibilityTimeout=0)["Messages"]
out["plain_has_no_attributes"] = "Attributes" not in plain[0]
out["fifo_errors"] = {
    "DelaySeconds": refusal(
        lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g", DelaySeconds=2)
    ),
    "NoGroup": refusal(lambda: sqs.send_message(QueueUrl=fifo, MessageBody="x")),
    "BatchNoGroup": refusal(
        lambda: sqs.send_message_batch(QueueUrl=fifo, Entries=[{"Id": "a", "MessageBody": "x"}])
    ),
    "NotFifo": refusal(lambda: sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "false"})),
}

# --- a standard queue: attribute values and those infrastructure tools set ------------------------
url = sqs.create_queue(
    QueueName=name,
    Attributes={
        "MessageRetentionPeriod": "1209600",
        "KmsMasterKeyId": "alias/aws/sqs",
        "KmsDataKeyReusePeriodSeconds": "600",
        "Policy": json.dumps({"Version": "2012-10-17", "Statement": []}),
    },
)["QueueUrl"]
got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
out["standard_attributes"] = {
    k: got.get(k)
    for k in (
        "MessageRetentionPeriod",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "SqsManagedSseEnabled",
        "FifoQueue",
        "DeduplicationScope",
    )
}
sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "", "SqsManagedSseEnabled": "true"})
out["sse"] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["SqsManagedSseEnabled"])["Attributes"]
high = sqs.create_queue(
    QueueName=f"{name}-high.fifo",
    Attributes={
        "FifoQueue": "true",
        "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId",
    },
)["QueueUrl"]
out["high_throughput"] = sqs.get_queue_attributes(
    QueueUrl=high, AttributeNames=["DeduplicationScope", "FifoThroughputLimit"]
)["Attributes"]
out["attribute_errors"] = {
    "Retention": refusal(
        lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "1209601"})
    ),
    "FifoOnly": refusal(
        lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "queue"})
    ),
    "FifoName": refusal(lambda: sqs.create_queue(QueueName=f"{name}-x.fifo")),
}

# --- a bare queue name as QueueUrl; message attribute names; empty answers -----------------------
attributes = {
    n: {"DataType": "String", "StringValue": v}
    for n, v in (("Help.Me", "Me"), ("Hello", "There"), ("héllo", "wörld"))
}
sent = sqs.send_message(QueueUrl=name, MessageBody="by name", MessageAttributes=attributes)
out["by_name"] = sent["MD5OfMessageBody"]
wild = sqs.receive_message(QueueUrl=name, MessageAttributeNames=["Hel.*"], VisibilityTimeout=0)["Messages"][0]
out["wildcard"] = [sorted(wild["MessageAttributes"]), wild["MD5OfMessageAttributes"]]
every = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"])["Messages"][
    0
]
out["all_attributes"] = sorted(every["MessageAttributes"])
out["standard_system"] = sorted(every["Attributes"])
sqs.delete_message(QueueUrl=url, ReceiptHandle=every["ReceiptHandle"])
out["empty"] = {
    "ReceiveMessage": sorted(k for k in sqs.receive_message(QueueUrl=url) if k != "ResponseMetadata"),
    "ListQueueTags": sorted(k for k in sqs.list_queue_tags(QueueUrl=url) if k != "ResponseMetadata"),
    "ListQueues": sorted(
        k for k in sqs.list_queues(QueueNamePrefix=f"{name}-none") if k != "ResponseMetadata"
    ),
    "SendMessageBatch": sorted(
        k
        for k in sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}])
        if k != "ResponseMetadata"
    ),
}

# --- permissions and identity --------------------------------------------------------------------
sqs.add_permission(QueueUrl=url, Label="cross", AWSAccountIds=["123456789012"], Actions=["SendMessage"])
policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
out["policy"] = [(s["Sid"], s["Action"]) for s in policy["Statement"]]
sqs.remove_permission(QueueUrl=url, Label="cross")
left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes", {})
out["policy_after"] = [s["Sid"] for s in json.loads(left.get("Policy", '{"Statement": []}'))["Statement"]]
who = sts.get_caller_identity()
out["sts"] = [who["Account"], who["Arn"]]

# --- errors: codes and words ---------------------------------------------------------------------
out["errors"] = {
    "MaxNumberOfMessages": refusal(lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)),
    "WaitTimeSeconds": refusal(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=21)),
    "EmptyBatch": refusal(lambda: sqs.delete_message_batch(QueueUrl=url, Entries=[])),
    "EmptyNames": refusal(
        lambda: sqs.receive_message(QueueUrl=url, AttributeNames=[], MessageAttributeNames=[])
    ),
    "ReceiptHandle": refusal(lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage")),
    "NonExistentQueue": refusal(lambda: sqs.get_queue_attributes(QueueUrl=f"{url}-gone")),
    "Label": refusal(lambda: sqs.remove_permission(QueueUrl=url, Label="nobody")),
    "Tags": refusal(lambda: sqs.tag_queue(QueueUrl=url, Tags={f"k{n}": "v" for n in range(51)})),
    "Delay": refusal(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901)),
}
for queue in (url, fifo, high):
    sqs.delete_queue(QueueUrl=queue)
print(json.dumps(out))
