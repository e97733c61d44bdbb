// Following a run's events and folding them into text: the same for a browser (durable-agent/client)
// and a Node program (durable-agent).
export { foldEvents, EventFold, type RunFold, type StepText } from './fold.ts';
export { followRun, FollowRunError, type FollowRunOptions } from './follow.ts';
export {
  RUN_EVENT_TYPES,
  type AbandonReason,
  type RunEvent,
  type RunEventData,
  type RunEventType,
  type UnknownRunEvent,
} from './protocol.ts';
