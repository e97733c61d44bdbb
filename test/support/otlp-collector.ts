/**
 * A local stand-in for an OpenTelemetry collector's OTLP/HTTP traces endpoint (POST /v1/traces). It
 * reads both encodings the exporters send — protobuf (the default) and JSON — into the same plain
 * spans, so a test asserts on what a tracing backend would show: names, parents, attributes, resource.
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CollectedSpan {
  name: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  kind: number;
  attributes: Record<string, unknown>;
  /** The attributes of the resource the span was exported under (service.name …). */
  resource: Record<string, unknown>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

export interface CollectedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  spans: CollectedSpan[];
}

export interface OtlpCollector {
  /** What OTEL_EXPORTER_OTLP_ENDPOINT is set to. */
  url: string;
  requests: CollectedRequest[];
  spans(): CollectedSpan[];
  close(): Promise<void>;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const requests: CollectedRequest[] = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const json = (req.headers['content-type'] ?? '').includes('json');
      try {
        requests.push({
          path: req.url ?? '',
          headers: req.headers,
          spans: json ? fromJson(JSON.parse(body.toString('utf8'))) : fromProtobuf(body),
        });
      } catch (e) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`unreadable export: ${(e as Error).message}`);
        return;
      }
      // An empty ExportTraceServiceResponse: zero bytes in protobuf, {} in JSON.
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    spans: () => requests.flatMap((r) => r.spans),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- OTLP/JSON -------------------------------------------------------------------------------

function jsonValue(v: any): unknown {
  if (!v || typeof v !== 'object') return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(jsonValue);
  return undefined;
}

const jsonAttributes = (list: any[] | undefined) => Object.fromEntries((list ?? []).map((kv) => [kv.key, jsonValue(kv.value)]));

function fromJson(body: any): CollectedSpan[] {
  return (body.resourceSpans ?? []).flatMap((rs: any) => {
    const resource = jsonAttributes(rs.resource?.attributes);
    return (rs.scopeSpans ?? []).flatMap((ss: any) =>
      (ss.spans ?? []).map((s: any) => ({
        name: s.name,
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        kind: s.kind,
        attributes: jsonAttributes(s.attributes),
        resource,
        statusCode: s.status?.code ?? 0,
      })),
    );
  });
}

// ---- OTLP/protobuf: just enough of the wire format to read ExportTraceServiceRequest ------------

interface Field {
  no: number;
  /** Varints as bigint; length-delimited fields as bytes; fixed64 as the raw 8 bytes. */
  value: bigint | Uint8Array;
}

function fieldsOf(buf: Uint8Array): Field[] {
  const fields: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buf[at++];
      if (byte === undefined) throw new Error('truncated varint');
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    switch (key & 7) {
      case 0:
        fields.push({ no, value: varint() });
        break;
      case 1:
        fields.push({ no, value: buf.subarray(at, (at += 8)) });
        break;
      case 2: {
        const length = Number(varint());
        fields.push({ no, value: buf.subarray(at, (at += length)) });
        break;
      }
      case 5:
        fields.push({ no, value: buf.subarray(at, (at += 4)) });
        break;
      default:
        throw new Error(`unsupported wire type ${key & 7}`);
    }
  }
  return fields;
}

const all = (buf: Uint8Array, no: number) =>
  fieldsOf(buf)
    .filter((f) => f.no === no)
    .map((f) => f.value);
const bytes = (buf: Uint8Array, no: number) => all(buf, no).at(-1) as Uint8Array | undefined;
const text = (buf: Uint8Array, no: number) => Buffer.from(bytes(buf, no) ?? new Uint8Array()).toString('utf8');
const hex = (buf: Uint8Array, no: number) => Buffer.from(bytes(buf, no) ?? new Uint8Array()).toString('hex');
const int = (buf: Uint8Array, no: number) => Number((all(buf, no).at(-1) as bigint | undefined) ?? 0n);

/** AnyValue: 1 string, 2 bool, 3 int, 4 double, 5 array. */
function protoValue(buf: Uint8Array): unknown {
  const [f] = fieldsOf(buf);
  if (!f) return undefined;
  switch (f.no) {
    case 1:
      return Buffer.from(f.value as Uint8Array).toString('utf8');
    case 2:
      return f.value === 1n;
    case 3:
      return Number(BigInt.asIntN(64, f.value as bigint));
    case 4:
      return Buffer.from(f.value as Uint8Array).readDoubleLE(0);
    case 5:
      return all(f.value as Uint8Array, 1).map((v) => protoValue(v as Uint8Array));
    default:
      return undefined;
  }
}

/** Repeated KeyValue (1 key, 2 value) at field `no`. */
const protoAttributes = (buf: Uint8Array, no: number) =>
  Object.fromEntries(all(buf, no).map((kv) => [text(kv as Uint8Array, 1), protoValue(bytes(kv as Uint8Array, 2) ?? new Uint8Array())]));

function fromProtobuf(body: Uint8Array): CollectedSpan[] {
  // ExportTraceServiceRequest 1: ResourceSpans (1 resource, 2 scope_spans); ScopeSpans 2: spans.
  return all(body, 1).flatMap((rs) => {
    const resourceBytes = bytes(rs as Uint8Array, 1);
    const resource = resourceBytes ? protoAttributes(resourceBytes, 1) : {};
    return all(rs as Uint8Array, 2).flatMap((ss) =>
      all(ss as Uint8Array, 2).map((sp) => {
        const span = sp as Uint8Array;
        const status = bytes(span, 15);
        return {
          name: text(span, 5),
          traceId: hex(span, 1),
          spanId: hex(span, 2),
          parentSpanId: hex(span, 4),
          kind: int(span, 6),
          attributes: protoAttributes(span, 9),
          resource,
          statusCode: status ? int(status, 3) : 0,
        };
      }),
    );
  });
}
