import type { RunEventData, RunEventType } from '../events/protocol.ts';

/** An event to write; `withNext` ones are written only when the statement also wrote the next tool's STARTED row. */
export interface NewEvent {
  type: RunEventType;
  data: object;
  withNext?: boolean;
}

export const newEvent = <T extends RunEventType>(type: T, data: RunEventData[T], withNext = false): NewEvent => ({ type, data, withNext });
