/**
 * `durable-agent encryption rotate | status`: the keys stored payloads are encrypted with, on the
 * database directly (the same one the server uses).
 */
import { subcommandOf } from './usage.ts';

export const ENCRYPTION_USAGE = `Usage: durable-agent encryption <subcommand> [options]

Subcommands:
  status        the key ids this database's values are encrypted with, and the one this process seals with
  rotate        encrypts every stored payload with the first key of ENCRYPTION_KEYS (or ENCRYPTION_KEY):
                values under older keys and values stored before encryption was on, in batches;
                then the older key ids are no longer needed

Options: --batch <n> (rows a batch, default 500), --json, --help. Before a rotation every running
process must have the new key first in its ENCRYPTION_KEYS (and the old ones after it).
`;

export async function encryptionCommand(argv: string[]): Promise<number> {
  const parsed = subcommandOf(argv, {
    command: 'encryption',
    usage: ENCRYPTION_USAGE,
    names: ['rotate', 'status'],
    options: { batch: { type: 'string' } },
  });
  if (!parsed) return 0;
  const { name, args, values, usage } = parsed;
  if (args.length > 0) throw usage(`unexpected argument "${args[0]}"`);
  const batch = values.batch === undefined ? 500 : Number(values.batch);
  if (!Number.isInteger(batch) || batch < 1 || batch > 100_000) throw usage('--batch must be a whole number from 1 to 100000');

  const { withDatabase } = await import('./database.ts');
  const { loadConfig } = await import('../config/environment.ts');
  const { Sealer } = await import('../store/encryption.ts');
  const { EncryptionKeys } = await import('../store/encryption-keys.ts');
  const sealer = new Sealer(loadConfig().encryptionKeys);
  const out = (text: string) => process.stdout.write(text);

  return withDatabase(async ({ pool, schema }) => {
    const keys = new EncryptionKeys(pool, { schema });
    if (name === 'status') {
      const stored = await keys.storedIds();
      if (values.json) return (out(`${JSON.stringify({ stored, sealingKey: sealer.keyId }, null, 2)}\n`), 0);
      out(`keys in use: ${stored.length ? stored.join(', ') : 'none (values are stored plain)'}\n`);
      out(`this process seals with: ${sealer.keyId ?? 'no key (ENCRYPTION_KEY is not set)'}\n`);
      return 0;
    }
    const report = await keys.rotate(sealer, batch, (table, done) => {
      if (!values.json) process.stderr.write(`  ${table}: ${done} rows read\n`);
    });
    if (values.json) return (out(`${JSON.stringify(report, null, 2)}\n`), 0);
    for (const [table, c] of Object.entries(report.tables)) {
      out(
        `${table}: ${c.read} rows read, ${c.rewritten} encrypted anew${c.changedMeanwhile ? `, ${c.changedMeanwhile} kept being written by a worker (left as written)` : ''}\n`,
      );
    }
    out(`values are now encrypted with key ${report.keyId}`);
    out(report.retired.length ? `; no longer needed: ${report.retired.join(', ')}\n` : '\n');
    if (report.stillUsed.length)
      out(`still in use by rows written meanwhile: ${report.stillUsed.join(', ')}; run encryption rotate again\n`);
    return 0;
  });
}
