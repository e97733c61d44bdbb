/**
 * @unit milliseconds — how soon a lease must run out for a keeper that renews every `intervalMs` to
 * renew it: every lease not written in the last third of an interval (3.3 s with the default lease: a
 * run taking a step every second or three is left alone). A lease left alone has more than this left,
 * so a round later it still has more than `leaseMs - 4/3 × intervalMs`, and if that round fails too,
 * more than `leaseMs - 7/3 × intervalMs` (⅔ of an interval, with the keepers' interval of a third of the
 * lease) for the one after; a lease renewed every round had one interval there.
 */
export const renewWithinMs = (leaseMs: number, intervalMs: number) => leaseMs - intervalMs / 3;
