/**
 * `runs purge --older-than 30d`: deletes every finished run that finished longer ago than that, with
 * its steps, events and the stored texts only it referred to, in batches (store/retention.ts). It
 * works on the database directly (DATABASE_URL, or the embedded one), not through the API: it is the
 * operator's command across tenants, like `keys`, and the API has no route that deletes in bulk.
 */
import { DEFAULT_TENANT } from '../domain/types.ts';
import { TENANT_PATTERN } from '../store/api-keys.ts';
import { count, parseDuration } from './format.ts';
import type { RunsSubcommand } from './runs-context.ts';

export const purgeCommand: RunsSubcommand = {
  name: 'purge',
  args: '--older-than <duration>',
  summary: 'delete finished runs older than that (30d, 12h, 90m); on the database directly',
  positionals: 0,
  options: {
    'older-than': { type: 'string', help: 'how long ago a run must have finished: <n>s, m, h, d or w' },
    tenant: { type: 'string', help: `only this tenant's runs (runs created without a key: ${DEFAULT_TENANT})` },
  },
  async run(ctx) {
    const olderThan = ctx.options['older-than'] as string | undefined;
    if (olderThan === undefined) throw ctx.usage('--older-than is required, e.g. --older-than 30d');
    const ms = parseDuration(olderThan);
    if (ms === null) throw ctx.usage(`--older-than "${olderThan}" is not a duration such as 30d, 12h or 90m`);
    const tenant = (ctx.options.tenant as string | undefined) ?? null;
    if (tenant !== null && !TENANT_PATTERN.test(tenant)) throw ctx.usage(`--tenant "${tenant}" is not a tenant name`);
    const { withDatabase } = await import('./database.ts');
    const { RunDeletion } = await import('../store/retention.ts');
    const cutoff = new Date(ctx.now.getTime() - ms);
    const deleted = await withDatabase(({ pool, schema }) => new RunDeletion(pool, { schema }).purge(cutoff, { tenant }));
    ctx.out(
      ctx.json
        ? `${JSON.stringify({ cutoff: cutoff.toISOString(), runsDeleted: deleted.runs, blobsDeleted: deleted.blobs })}\n`
        : `deleted ${count(deleted.runs)} finished run${deleted.runs === 1 ? '' : 's'} that finished before ${cutoff.toISOString()}` +
            (deleted.blobs ? ` (and ${deleted.blobs} stored text${deleted.blobs === 1 ? '' : 's'} no other run refers to)` : '') +
            '\n',
    );
    return 0;
  },
};
