// The AWS SDK for JavaScript v3, unchanged, against simplequeue's Amazon SQS door.
// Usage: node send_receive.mjs [ENDPOINT] [QUEUE_NAME]   (tests/sqs/test_javascript_sdk.py runs it)
// Prints one JSON object: what was sent, received and deleted, and the name of one error.
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";

const [endpoint = "http://127.0.0.1:8000", queueName = "emails"] = process.argv.slice(2);
const sqs = new SQSClient({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "anything", secretAccessKey: "anything" }, // any, without API keys
  // md5 is left on (the default): the SDK checks MD5OfMessageBody and MD5OfBody of every answer.
});

const { QueueUrl } = await sqs.send(
  new CreateQueueCommand({ QueueName: queueName, Attributes: { VisibilityTimeout: "30" } }),
);
const one = await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "héllo ✓ 🎉" }));
const batch = await sqs.send(
  new SendMessageBatchCommand({
    QueueUrl,
    Entries: [
      { Id: "a", MessageBody: '{"n": 1}' },
      { Id: "b", MessageBody: "two", DelaySeconds: 0 },
    ],
  }),
);

const received = [];
while (received.length < 3) {
  const { Messages = [] } = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 2,
      MessageSystemAttributeNames: ["ApproximateReceiveCount"],
    }),
  );
  if (Messages.length === 0) break;
  received.push(...Messages);
}
const deleted = await sqs.send(
  new DeleteMessageBatchCommand({
    QueueUrl,
    Entries: received.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
  }),
);
const { Attributes } = await sqs.send(
  new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["ApproximateNumberOfMessages"] }),
);

let error = null;
try {
  await sqs.send(new GetQueueUrlCommand({ QueueName: `${queueName}-missing` }));
} catch (e) {
  // e.name is "QueueDoesNotExist"; e instanceof QueueDoesNotExist holds too.
  error = { name: e.name, status: e.$metadata?.httpStatusCode, typed: e instanceof QueueDoesNotExist };
}

console.log(
  JSON.stringify({
    sent: [one.MessageId, ...batch.Successful.map((s) => s.MessageId)],
    failed: batch.Failed ?? [],
    received: received.map((m) => ({
      id: m.MessageId,
      body: m.Body,
      md5: m.MD5OfBody,
      receives: m.Attributes?.ApproximateReceiveCount,
    })),
    md5Checked: sqs.config.md5 !== false,
    deleted: deleted.Successful.length,
    left: Attributes.ApproximateNumberOfMessages,
    error,
  }),
);
