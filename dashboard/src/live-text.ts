import { EventFold } from './events/fold.ts';
export const f = new EventFold();
