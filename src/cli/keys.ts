/**
 * `durable-agent keys create | list | revoke`: API keys, on the database directly (the same one the
 * server uses). A key is printed once, alone on stdout (`KEY=$(durable-agent keys create --tenant
 * acme)`), with what to do with it on stderr; only its hash is stored. A server that is running
 * requires keys within a second of the first one's creation.
 */
import type { ApiKeyInfo } from '../store/api-keys.ts';
import { ago, type Column, oneLine, table } from './format.ts';
import { subcommandOf } from './usage.ts';

export const KEYS_USAGE = `Usage: durable-agent keys <subcommand> [options]

Subcommands:
  create --tenant <name> [--label <text>]   a new key for the tenant, printed once (only its hash is kept)
  list                                      every key: id, tenant, label, created, last used, revoked
  revoke <id>                               the key stops working at once (it stays listed)

Options: --json (print JSON), --help. They work on the database of DATABASE_URL (or the embedded one
under DATA_DIR), as the server does. Once any key exists, every API request needs one.
`;

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function infoJson(k: ApiKeyInfo) {
  const iso = (d: Date | null) => (d ? d.toISOString() : null);
  return {
    id: k.id,
    tenant: k.tenant,
    label: k.label,
    createdAt: iso(k.createdAt),
    lastUsedAt: iso(k.lastUsedAt),
    revokedAt: iso(k.revokedAt),
  };
}

export async function keysCommand(argv: string[]): Promise<number> {
  const parsed = subcommandOf(argv, {
    command: 'keys',
    usage: KEYS_USAGE,
    names: ['create', 'list', 'revoke'],
    options: { tenant: { type: 'string' }, label: { type: 'string' } },
  });
  if (!parsed) return 0;
  const { name, args, values, usage } = parsed;
  if ((values.tenant !== undefined || values.label !== undefined) && name !== 'create') throw usage('--tenant and --label apply to create');
  const expected = name === 'revoke' ? 1 : 0;
  if (args.length < expected) throw usage('missing <id>');
  if (args.length > expected) throw usage(`unexpected argument "${args[expected]}"`);
  if (name === 'create' && values.tenant === undefined) throw usage('--tenant is required');

  const { withDatabase } = await import('./database.ts');
  const { ApiKeys, checkTenant } = await import('../store/api-keys.ts');
  const { InputError } = await import('../domain/errors.ts');
  const out = (text: string) => process.stdout.write(text);
  try {
    if (name === 'create') checkTenant(values.tenant!);
  } catch (e) {
    if (e instanceof InputError) throw usage(e.message);
    throw e;
  }

  return withDatabase(async ({ pool, schema }) => {
    const keys = new ApiKeys(pool, { schema });
    switch (name) {
      case 'create': {
        const k = await keys.create(values.tenant!, values.label ?? null);
        if (values.json) return (out(json({ ...infoJson(k), key: k.key })), 0);
        out(`${k.key}\n`);
        process.stderr.write(
          `created key ${k.id} for tenant ${k.tenant}${k.label ? ` (${k.label})` : ''}.\n` +
            'This is the only time the key is shown: keep it now. Send it as Authorization: Bearer <key>\n' +
            '(the runs commands read it from DURABLE_AGENT_KEY). API requests now need a key.\n',
        );
        return 0;
      }
      case 'list': {
        const all = await keys.list();
        if (values.json) return (out(json(all.map(infoJson))), 0);
        if (all.length === 0) return (out('no keys: requests need none while the server listens on loopback\n'), 0);
        const now = new Date();
        const columns: Column<ApiKeyInfo>[] = [
          { title: 'ID', value: (k) => k.id },
          { title: 'TENANT', value: (k) => k.tenant },
          { title: 'LABEL', value: (k) => oneLine(k.label ?? '', 30) },
          { title: 'CREATED', value: (k) => ago(k.createdAt, now) },
          { title: 'LAST USED', value: (k) => (k.lastUsedAt ? ago(k.lastUsedAt, now) : 'never') },
          { title: 'REVOKED', value: (k) => (k.revokedAt ? ago(k.revokedAt, now) : '') },
        ];
        return (out(table(all, columns)), 0);
      }
      default: {
        const k = await keys.revoke(args[0]!);
        if (!k) {
          process.stderr.write(`durable-agent: keys revoke: no key with id ${oneLine(args[0]!, 60)} (see keys list)\n`);
          return 1;
        }
        out(values.json ? json(infoJson(k)) : `revoked key ${k.id} (tenant ${k.tenant}); requests with it are refused from now on\n`);
        return 0;
      }
    }
  });
}
