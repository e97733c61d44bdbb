import { describe, expect, it } from 'vitest';
import { refuseOldServer } from '../../src/db/pool.ts';

describe('the PostgreSQL version at start', () => {
  it('refuses 13 and older with a message naming the server and what is needed', () => {
    expect(() => refuseOldServer(130_011, 'postgres://db.example:5432/app')).toThrow(
      'the database postgres://db.example:5432/app is PostgreSQL 13: durable-agent needs PostgreSQL 14 or newer (14 to 18 are tested)',
    );
    expect(() => refuseOldServer(90_624, 'x')).toThrow(/is PostgreSQL 9: .* 14 or newer/);
  });

  it('takes 14 to 18, and what comes after', () => {
    for (const v of [140_000, 150_014, 160_010, 170_006, 180_004, 190_000]) expect(() => refuseOldServer(v, 'x')).not.toThrow();
  });
});
