// The AWS SDK for JavaScript v3, unchanged, against simplequeue's Amazon SQS door.
// Usage: node send_receive.mjs [ENDPOINT] [QUEUE_NAME]   (tests/sqs/test_javascript_sdk.py runs it)
// Prints one JSON object: what was sent, received and deleted, and the name of one error.
import { createHash } from "node:crypto";
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
const attributes = {
  trace: { DataType: "String", StringValue: "héllo ✓" },
  price: { DataType: "Number.float", StringValue: "2.50" },
  thumb: { DataType: "Binary", BinaryValue: new Uint8Array([0, 255, 60]) },
};
const one = await sqs.send(
  new SendMessageCommand({ QueueUrl, MessageBody: "héllo ✓ 🎉", MessageAttributes: attributes }),
);
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
      MessageAttributeNames: ["All"],
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

// MD5OfMessageAttributes as SQS defines it (this SDK version checks the bodies' MD5s only): the
// attributes sorted by name, each its name, type, transport byte (1 text, 2 binary) and value, every
// length-prefixed part a 4-byte big-endian length and its bytes.
function md5OfAttributes(given) {
  const hash = createHash("md5");
  const part = (bytes) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length);
    hash.update(bytes);
  };
  for (const name of Object.keys(given).sort()) {
    const { DataType, StringValue, BinaryValue } = given[name];
    part(Buffer.from(name, "utf8"));
    part(Buffer.from(DataType, "utf8"));
    hash.update(Buffer.from([BinaryValue ? 2 : 1]));
    part(BinaryValue ? Buffer.from(BinaryValue) : Buffer.from(StringValue, "utf8"));
  }
  return hash.digest("hex");
}
const hexBinary = (given = {}) =>
  Object.fromEntries(
    Object.entries(given).map(([name, { BinaryValue, ...rest }]) => [
      name,
      BinaryValue ? { ...rest, BinaryValue: Buffer.from(BinaryValue).toString("hex") } : rest,
    ]),
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
    sentAttributesMd5: [one.MD5OfMessageAttributes, md5OfAttributes(attributes)],
    failed: batch.Failed ?? [],
    received: received.map((m) => ({
      id: m.MessageId,
      body: m.Body,
      md5: m.MD5OfBody,
      receives: m.Attributes?.ApproximateReceiveCount,
      attributes: hexBinary(m.MessageAttributes),
      attributesMd5: [m.MD5OfMessageAttributes ?? null, m.MessageAttributes ? md5OfAttributes(m.MessageAttributes) : null],
    })),
    md5Checked: sqs.config.md5 !== false,
    deleted: deleted.Successful.length,
    left: Attributes.ApproximateNumberOfMessages,
    error,
  }),
);
