/**
 * The API's JSON as the dashboard reads it: the types the server's zod schemas infer, so a change to
 * a schema that the page does not follow fails its type-check. The imports are of types only: they
 * are erased from the compiled module, and neither zod nor any server module reaches the browser.
 */
import type { z } from 'zod';
import type {
  RunJson,
  RunListItemJson,
  RunPageJson,
  StepDetail as StepDetailJson,
  TimelineItem,
  ToolRequestJson,
  WaitingJson,
} from '../../src/api/schemas.ts';
import type { OverviewJson } from '../../src/api/schemas-overview.ts';
import type { FilesJson } from '../../src/api/schemas-files.ts';
import type { ScheduleJson, SchedulePageJson } from '../../src/api/schemas-schedules.ts';

export type Run = z.infer<typeof RunJson>;
export type RunStatus = Run['status'];
export type Waiting = z.infer<typeof WaitingJson>;
export type PendingToolCall = Waiting['toolCalls'][number];
export type RunListItem = z.infer<typeof RunListItemJson>;
export type RunPage = z.infer<typeof RunPageJson>;

export type TimelineStep = z.infer<typeof TimelineItem>;
export type StepKind = TimelineStep['kind'];
export type StepStatus = TimelineStep['status'];

export type StepDetail = z.infer<typeof StepDetailJson>;
/** A MODEL step's request: the Messages API request rebuilt from the log. */
export type ModelRequest = Exclude<StepDetail['request'], ToolRequest | null>;
/** A TOOL step's request: the model's tool_use call. */
export type ToolRequest = z.infer<typeof ToolRequestJson>;
export type Message = ModelRequest['messages'][number];
/** A Messages API content block, verbatim. */
export type ContentBlock = Exclude<StepDetail['response'], string | null>[number];

export type Overview = z.infer<typeof OverviewJson>;
export type OverviewWindow = Overview['hour'];
export type UsageTotals = OverviewWindow['totals'];

export type Schedule = z.infer<typeof ScheduleJson>;
export type SchedulePage = z.infer<typeof SchedulePageJson>;

/** A run's workspace as of a step (GET /api/runs/{id}/files). */
export type RunFiles = z.infer<typeof FilesJson>;
export type RunFile = RunFiles['files'][number];
export type FileChange = NonNullable<RunFiles['changed']>[number];
