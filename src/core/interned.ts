/**
 * One copy of each string among the few a column takes (agents, models, tenants, workers, statuses).
 * The database driver makes a new string for every value of every row: for a run held through its
 * attempt, with thousands in flight, that is six copies a run of a handful of names. Past `max`
 * distinct strings the table starts over, so a column with many values costs no more than before.
 */
export class Interned {
  private readonly seen = new Map<string, string>();

  constructor(private readonly max = 1_000) {}

  /** The strings it holds now. */
  get size(): number {
    return this.seen.size;
  }

  of<S extends string | null>(s: S): S {
    if (s === null) return s;
    const known = this.seen.get(s);
    if (known !== undefined) return known as S;
    if (this.seen.size >= this.max) this.seen.clear();
    this.seen.set(s, s);
    return s;
  }
}
