/**
 * The OpenTelemetry SDK behind the spans of tracing.ts, registered by the CLI when the OTEL_*
 * variables name a collector: a tracer provider as the global one, whose batches go over OTLP/HTTP
 * (protobuf, or JSON) to that collector. Loaded only then, by a dynamic import: a process that
 * exports nothing never loads the SDK. Library users register their own SDK instead.
 */
import { diag, DiagLogLevel, trace } from '@opentelemetry/api';
import type { Logger } from './logger.ts';
import type { OtelExportConfig } from './otel-config.ts';

/**
 * @unit milliseconds — how long stopping waits for the last batch: a collector that is down must not
 * keep a stopping worker from exiting (the exporter's own timeout and retries take longer).
 */
const SHUTDOWN_LIMIT_MS = 5_000;

export interface OtelExport {
  /** Where spans go, for the startup banner (the URL only: the headers may hold a token). */
  readonly tracesUrl: string;
  /** From now on, the SDK's own complaints (a collector that refuses or cannot be reached) are warnings in this log. */
  reportTo(logger: Logger): void;
  /** Sends the spans still buffered, then stops exporting. Safe to call twice. */
  shutdown(): Promise<void>;
}

/** Registers the SDK as the global tracer provider; the spans of every run from now on are exported. */
export async function startOtelExport(config: OtelExportConfig, extraResource: Record<string, string> = {}): Promise<OtelExport> {
  const [{ BasicTracerProvider, BatchSpanProcessor }, { defaultResource, resourceFromAttributes }, { OTLPTraceExporter }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/resources'),
      config.protocol === 'http/json'
        ? import('@opentelemetry/exporter-trace-otlp-http')
        : import('@opentelemetry/exporter-trace-otlp-proto'),
    ]);
  // Complaints before the log exists are kept (a few) and written when it does.
  let sink: Logger | null = null;
  const early: string[] = [];
  const forward = (...args: unknown[]) => {
    const message = `OpenTelemetry: ${args.map(String).join(' ')}`;
    if (sink) sink.warn({ event: 'otel_export' }, message);
    else if (early.length < 20) early.push(message);
  };
  const quiet = () => {};
  diag.setLogger(
    { error: forward, warn: forward, info: quiet, debug: quiet, verbose: quiet },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );

  const exporter = new OTLPTraceExporter({ url: config.tracesUrl, headers: config.headers });
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ ...extraResource, ...config.resource })),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const registered = trace.setGlobalTracerProvider(provider);
  if (!registered) {
    // Another SDK registered first (e.g. preloaded with --require): it keeps the spans, ours stands down.
    forward('another tracer provider is already registered: its exporter gets the spans, the OTEL_EXPORTER_OTLP_* settings are not used');
  }
  let stopping: Promise<void> | null = null;
  return {
    tracesUrl: config.tracesUrl,
    reportTo(logger) {
      sink = logger;
      for (const message of early.splice(0)) logger.warn({ event: 'otel_export' }, message);
    },
    shutdown: () =>
      (stopping ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const limit = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SHUTDOWN_LIMIT_MS)));
        try {
          const outcome = await Promise.race([provider.shutdown().then(() => 'sent' as const), limit]);
          if (outcome === 'late')
            forward(`the last spans could not be sent to ${config.tracesUrl} within ${SHUTDOWN_LIMIT_MS} ms and are dropped`);
        } catch (error) {
          forward(`the last spans could not be sent to ${config.tracesUrl}: ${error instanceof Error ? error.message : String(error)}`);
        } finally {
          clearTimeout(timer);
          if (registered) trace.disable();
          diag.disable();
        }
      })()),
  };
}
