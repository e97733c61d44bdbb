import type { RunEventData, RunEventType } from '../events/protocol.ts';

/** An event to write. */
export interface NewEvent {
  type: RunEventType;
  data: object;
}

export const newEvent = <T extends RunEventType>(type: T, data: RunEventData[T]): NewEvent => ({ type, data });
