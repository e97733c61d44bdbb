/**
 * Every tool_use id of a run so far, with the model step that made it: how a reused id is caught. Each
 * run in flight keeps one for its whole attempt, and most runs make a handful of calls: a Map of five
 * ids holds ~300 bytes, of eleven ~530 (its table is made for more); the same pairs in one array made
 * to its size, ~180 and ~270.
 * Past SMALL ids it is a Map, so that a run of thousands of calls looks each one up at once.
 */
const SMALL = 32;

const NO_PAIRS: readonly (string | number)[] = [];

export class ToolUseIds {
  /** id, seq, id, seq… while there are SMALL ids or fewer; empty after, when `map` holds them. */
  private pairs = NO_PAIRS;
  private map: Map<string, number> | null = null;

  /** The seq of the model step that first made `id`; undefined for an id not made yet. */
  firstSeq(id: string): number | undefined {
    if (this.map) return this.map.get(id);
    const { pairs } = this;
    for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === id) return pairs[i + 1] as number;
    return undefined;
  }

  /** Records `id` as made by model step `seq` (an id made already is the caller's to refuse). */
  add(id: string, seq: number): void {
    if (this.map) {
      this.map.set(id, seq);
    } else if (this.pairs.length < SMALL * 2) {
      this.pairs = this.pairs.concat(id, seq); // made to its size (see exact-array.ts)
    } else {
      this.map = new Map();
      for (let i = 0; i < this.pairs.length; i += 2) this.map.set(this.pairs[i] as string, this.pairs[i + 1] as number);
      this.map.set(id, seq);
      this.pairs = NO_PAIRS;
    }
  }
}
