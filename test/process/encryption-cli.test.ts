/**
 * `durable-agent encryption status | rotate` as a person runs them (the compiled CLI, on a real
 * PostgreSQL): what they print, their exit codes, and what the database holds afterwards.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Sealer } from '../../src/store/encryption.ts';
import { EncryptionKeys } from '../../src/store/encryption-keys.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { CliProcesses, cleanEnv } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';

const OLD = randomBytes(32).toString('base64');
const NEW = randomBytes(32).toString('base64');

let db: TestDatabase;
let procs: CliProcesses;
beforeEach(async () => {
  db = await testDatabase();
  procs = new CliProcesses();
});
afterEach(async () => {
  await db.close();
});

async function cli(args: string[], env: Record<string, string>) {
  const p = procs.start(args.join(' '), args, cleanEnv({ DATABASE_URL: db.url, ...env }));
  const { code } = await p.exited;
  return { code, out: p.out, err: p.err };
}

describe('durable-agent encryption', () => {
  it('rotates every value to the first key, then says the old one is no longer needed', async () => {
    const sealer = new Sealer([{ id: 'old', key: Buffer.from(OLD, 'base64') }]);
    await new EncryptionKeys(db.pool).check(sealer);
    const records = new RunRecords(db.pool, { sealer });
    const run = await records.create({
      input: 'the secret question',
      model: 'm',
      tokenBudget: 100,
      timeoutSeconds: 60,
      maxSteps: 5,
      metadata: { a: 'b' },
    });

    const keys = { ENCRYPTION_KEYS: `new:${NEW},old:${OLD}` };
    const status = await cli(['encryption', 'status'], keys);
    expect(status).toMatchObject({ code: 0, out: 'keys in use: old\nthis process seals with: new\n' });

    const rotated = await cli(['encryption', 'rotate', '--batch', '1'], keys);
    expect(rotated.code, rotated.err).toBe(0);
    expect(rotated.out).toContain('run: 1 rows read, 1 encrypted anew');
    expect(rotated.out).toContain('values are now encrypted with key new; no longer needed: old');
    expect(await new EncryptionKeys(db.pool).storedIds()).toEqual(['new']);
    const { rows } = await db.pool.query<{ input: string }>('SELECT input FROM durable_agent.run WHERE id = $1', [run.id]);
    expect(rows[0]!.input).toMatch(/^da\.enc:1:t:new:/);
    const onlyNewRecords = new RunRecords(db.pool, { sealer: new Sealer([{ id: 'new', key: Buffer.from(NEW, 'base64') }]) });
    expect(await onlyNewRecords.get(run.id)).toMatchObject({ input: 'the secret question', metadata: { a: 'b' } });

    // Again: nothing left to do.
    const again = await cli(['encryption', 'rotate'], { ENCRYPTION_KEYS: `new:${NEW}` });
    expect(again.out).toContain('run: 1 rows read, 0 encrypted anew');
  });

  it('answers a missing key, a bad key and a bad call with one readable line', async () => {
    const noKey = await cli(['encryption', 'rotate'], {});
    expect(noKey.code).toBe(2);
    expect(noKey.err).toBe('durable-agent: encryption rotate needs ENCRYPTION_KEY or ENCRYPTION_KEYS (the first key seals)\n');
    const short = randomBytes(8).toString('base64');
    const badKey = await cli(['encryption', 'status'], { ENCRYPTION_KEY: short });
    expect(badKey.code).toBe(2);
    expect(badKey.err).toContain('ENCRYPTION_KEY must be 32 bytes in base64');
    expect(badKey.err).not.toContain(short);
    const badBatch = await cli(['encryption', 'rotate', '--batch', '0'], { ENCRYPTION_KEY: NEW });
    expect(badBatch.code).toBe(2);
    expect(badBatch.err).toContain('--batch must be a whole number from 1 to 100000');
  });
});
