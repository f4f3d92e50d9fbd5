/**
 * The frames of Feishu's long connection, written out by hand from the wire format so the fake
 * checks the SDK's encoding instead of sharing it: protobuf `pbbp2.Frame`
 *
 * ```
 * Frame  { 1 SeqID uint64; 2 LogID uint64; 3 service int32; 4 method int32 (0 control, 1 data);
 *          5 headers repeated Header; 6 payloadEncoding string; 7 payloadType string;
 *          8 payload bytes; 9 LogIDNew string }
 * Header { 1 key string; 2 value string }
 * ```
 *
 * Control frames carry `type: ping | pong`; data frames carry `type: event`, `message_id`, `sum`,
 * `seq` and `trace_id`, and the client answers a data frame with the same frame, its payload
 * replaced by `{"code":200}`.
 */

export interface Frame {
  seqId: number;
  logId: number;
  service: number;
  method: number;
  headers: Record<string, string>;
  payload?: Buffer;
}

export const CONTROL = 0;
export const DATA = 1;

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = BigInt(value);
  if (rest < 0n) rest += 1n << 64n; // int32 negatives are sent as ten-byte varints
  do {
    let byte = Number(rest & 0x7fn);
    rest >>= 7n;
    if (rest > 0n) byte |= 0x80;
    bytes.push(byte);
  } while (rest > 0n);
  return Buffer.from(bytes);
}

function key(field: number, wireType: number): Buffer {
  return varint((field << 3) | wireType);
}

function lengthDelimited(field: number, bytes: Buffer): Buffer {
  return Buffer.concat([key(field, 2), varint(bytes.length), bytes]);
}

export function encodeFrame(frame: Frame): Buffer {
  const parts = [key(1, 0), varint(frame.seqId), key(2, 0), varint(frame.logId), key(3, 0), varint(frame.service), key(4, 0), varint(frame.method)];
  for (const [name, value] of Object.entries(frame.headers)) {
    parts.push(lengthDelimited(5, Buffer.concat([lengthDelimited(1, Buffer.from(name)), lengthDelimited(2, Buffer.from(value))])));
  }
  if (frame.payload) parts.push(lengthDelimited(8, frame.payload));
  return Buffer.concat(parts);
}

class Reader {
  offset = 0;
  constructor(private readonly bytes: Buffer) {}

  get done(): boolean {
    return this.offset >= this.bytes.length;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = this.bytes[this.offset++];
      if (byte === undefined) throw new Error("frame: truncated varint");
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  }

  bytesField(): Buffer {
    const length = Number(this.varint());
    const slice = this.bytes.subarray(this.offset, this.offset + length);
    if (slice.length !== length) throw new Error("frame: truncated field");
    this.offset += length;
    return slice;
  }
}

function decodeHeader(bytes: Buffer): [string, string] {
  const reader = new Reader(bytes);
  let name = "";
  let value = "";
  while (!reader.done) {
    const tag = Number(reader.varint());
    if (tag >> 3 === 1) name = reader.bytesField().toString("utf8");
    else if (tag >> 3 === 2) value = reader.bytesField().toString("utf8");
    else throw new Error(`header: unexpected field ${tag >> 3}`);
  }
  return [name, value];
}

export function decodeFrame(bytes: Buffer): Frame {
  const reader = new Reader(bytes);
  const frame: Frame = { seqId: 0, logId: 0, service: 0, method: 0, headers: {} };
  const seen = new Set<number>();
  while (!reader.done) {
    const tag = Number(reader.varint());
    const field = tag >> 3;
    const wireType = tag & 7;
    seen.add(field);
    if (wireType === 0) {
      const value = reader.varint();
      const signed = value >= 1n << 63n ? Number(value - (1n << 64n)) : Number(value);
      if (field === 1) frame.seqId = signed;
      else if (field === 2) frame.logId = signed;
      else if (field === 3) frame.service = signed;
      else if (field === 4) frame.method = signed;
    } else if (wireType === 2) {
      const value = reader.bytesField();
      if (field === 5) {
        const [name, headerValue] = decodeHeader(value);
        frame.headers[name] = headerValue;
      } else if (field === 8) frame.payload = Buffer.from(value);
    } else {
      throw new Error(`frame: unexpected wire type ${wireType}`);
    }
  }
  for (const required of [1, 2, 3, 4]) if (!seen.has(required)) throw new Error(`frame: required field ${required} missing`);
  return frame;
}
