// Opt-in OpenTelemetry tracing with Temporal's interceptors: client calls, workflow execution
// (spans leave the workflow through a sink, which is not called while history replays, so a
// replay adds no spans) and every turn, model call and tool call as activity spans.
import type { ClientInterceptors } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import type { Tracer } from '@opentelemetry/api';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { WorkerOptions } from '@temporalio/worker';

export interface SubagentTracing {
  /** Where spans go (a BatchSpanProcessor with an OTLP exporter, say). */
  spanProcessor: SpanProcessor;
  /** Describes the service; default `service.name = durable-subagents`. */
  resource?: Resource;
}

/** The workflow-side interceptors, to bundle into the workflow code (`bundleSubagentWorkflows({ tracing: true })`). */
export const TRACING_WORKFLOW_MODULE =
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** Worker options that trace activities and export workflow spans, both to `tracing.spanProcessor`. */
export function tracingWorkerOptions(tracing: SubagentTracing): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const resource = resourceOf(tracing);
  const tracer = tracerOf(tracing, resource);
  return {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks: { exporter: makeWorkflowExporter(tracing.spanProcessor, resource) },
  };
}

/**
 * Client interceptors (`new Client({ interceptors })`) that open a span per workflow call and
 * carry its context into the run; spans go to `tracing.spanProcessor`, or to the global tracer
 * provider when none is given.
 */
export function tracingClientInterceptors(tracing?: SubagentTracing): ClientInterceptors {
  const options = tracing ? { tracer: tracerOf(tracing, resourceOf(tracing)) } : {};
  return { workflow: [new OpenTelemetryWorkflowClientInterceptor(options)] };
}

function resourceOf(tracing: SubagentTracing): Resource {
  return tracing.resource ?? new Resource({ 'service.name': 'durable-subagents' });
}

function tracerOf(tracing: SubagentTracing, resource: Resource): Tracer {
  const provider = new BasicTracerProvider({ resource });
  provider.addSpanProcessor(tracing.spanProcessor);
  return provider.getTracer('durable-subagents');
}
