/**
 * `items` in an array of exactly their number. An array that grew by `push` (and the result of
 * `filter`, which grows the same way) keeps room for 16 more elements, ~120 bytes, for as long as it
 * lives: nothing gives it back. Arrays that a run keeps for its whole life (its conversation's content
 * blocks, thousands of runs in flight) are copied to their size once, when made.
 */
export const exact = <T>(items: readonly T[]): T[] => items.slice();
