/**
 * The standard OTEL_* variables, as far as this project honours them, turned into where and how spans
 * are exported. Pure: config.ts reads the environment and passes the values in. Values of headers are
 * never echoed in an error: they usually hold a collector's token.
 */
import { ConfigError } from '../domain/errors.ts';

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** The OTEL_* values config.ts has read and checked (absent = unset). */
export interface OtelEnv {
  OTEL_SDK_DISABLED?: boolean;
  OTEL_TRACES_EXPORTER?: 'otlp' | 'none';
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_HEADERS?: string;
  OTEL_EXPORTER_OTLP_TRACES_HEADERS?: string;
  OTEL_EXPORTER_OTLP_PROTOCOL?: OtlpProtocol;
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?: OtlpProtocol;
  OTEL_SERVICE_NAME?: string;
  OTEL_RESOURCE_ATTRIBUTES?: string;
}

/** Where the CLI sends its spans; null in the configuration means no export (and no SDK loaded). */
export interface OtelExportConfig {
  /** The full URL spans are POSTed to, e.g. http://collector:4318/v1/traces. */
  tracesUrl: string;
  protocol: 'http/protobuf' | 'http/json';
  /** Sent with every export (an auth token, a tenant); never logged. */
  headers: Record<string, string>;
  /** Resource attributes: service.name and those of OTEL_RESOURCE_ATTRIBUTES. */
  resource: Record<string, string>;
}

export const DEFAULT_SERVICE_NAME = 'durable-agent';

/**
 * The export the variables ask for, or null: no endpoint set, OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none. Per signal variables win over the general ones; the general endpoint is a
 * base to which `v1/traces` is added, the traces endpoint is used as it is (the specification's rule).
 */
export function otelExportConfig(env: OtelEnv): OtelExportConfig | null {
  if (env.OTEL_SDK_DISABLED || env.OTEL_TRACES_EXPORTER === 'none') return null;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base ? `${base.replace(/\/+$/, '')}/v1/traces` : null);
  if (!tracesUrl) return null;
  const protocolVariable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  if (protocol === 'grpc') {
    throw new ConfigError(
      `invalid configuration: ${protocolVariable}: grpc is not supported; use http/protobuf (the default) or http/json`,
    );
  }
  const headers = {
    ...parseKeyValues(env.OTEL_EXPORTER_OTLP_HEADERS, 'OTEL_EXPORTER_OTLP_HEADERS'),
    ...parseKeyValues(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
  };
  const resource = {
    ...parseKeyValues(env.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES'),
    'service.name': env.OTEL_SERVICE_NAME ?? DEFAULT_SERVICE_NAME,
  };
  return { tracesUrl, protocol, headers, resource };
}

/**
 * `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage format the specification
 * names). Blank entries are skipped; an entry without `=` or without a key is an error that names
 * the entry's position, never its text.
 */
export function parseKeyValues(text: string | undefined, variable: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  const entries = text.split(',');
  entries.forEach((entry, i) => {
    if (entry.trim() === '') return;
    const eq = entry.indexOf('=');
    const key = eq > 0 ? entry.slice(0, eq).trim() : '';
    if (!key) throw new ConfigError(`invalid configuration: ${variable}: entry ${i + 1} is not key=value`);
    try {
      out[key] = decodeURIComponent(entry.slice(eq + 1).trim());
    } catch {
      throw new ConfigError(`invalid configuration: ${variable}: the value of entry ${i + 1} is not valid percent-encoding`);
    }
  });
  return out;
}
