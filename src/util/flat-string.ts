/**
 * Makes a string built piece by piece (a rope: an object per concatenation, each piece kept) one flat
 * string in place, so whatever holds it holds its characters alone: for text kept long after it was
 * built. V8 flattens a rope in place when a regular expression reads it, in optimized code too; a read
 * whose result goes unused (charCodeAt, say) is dropped once its caller is optimized, and flattens
 * nothing then.
 */
export function flattenInPlace(text: string): void {
  READ_WHOLE.test(text);
}

const READ_WHOLE = /^/;
