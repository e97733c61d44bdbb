/** How the schema reaches the statements (src/db/schema.ts): escaped once, the default as it always read. */
import { describe, expect, it } from 'vitest';
import { schemaSql, statementName } from '../../src/db/schema.ts';
import { claimSql } from '../../src/store/claim-sql.ts';
import { livenessSql } from '../../src/store/liveness-sql.ts';
import { stepBatchSql } from '../../src/store/step-batch-sql.ts';

describe('the schema in statements', () => {
  it('is the default written bare, and any other name as a quoted identifier', () => {
    expect(schemaSql()).toBe('durable_agent');
    expect(schemaSql('durable_agent')).toBe('durable_agent');
    expect(schemaSql('agents_here')).toBe('"agents_here"');
    expect(schemaSql('Agents "B"; DROP TABLE run')).toBe('"Agents ""B""; DROP TABLE run"');
  });

  it('names every table of a statement in that schema', () => {
    const claim = claimSql(schemaSql('agents_here')).claim.text;
    expect(claim).toContain('FROM "agents_here".run');
    expect(claim).not.toContain('durable_agent.');
  });

  it("keeps another schema's prepared statements apart by name, and the default's names as they were", () => {
    expect(statementName('durable_agent_claim', schemaSql())).toBe('durable_agent_claim');
    const other = statementName('durable_agent_claim', schemaSql('agents_here'));
    expect(other).toMatch(/^durable_agent_claim__[0-9a-f]{12}$/);
    expect(statementName('durable_agent_claim', schemaSql('agents_here'))).toBe(other);
    expect(statementName('durable_agent_claim', schemaSql('agents_there'))).not.toBe(other);
    // PostgreSQL compares a name's first 63 bytes: two long schema names that start alike still differ there.
    const long = (tail: string) =>
      stepBatchSql(schemaSql(`tenant_with_a_rather_long_schema_name_for_${tail}`)).MODEL_STEP_FORMS.get(
        'durable_agent_checkpoint_model_final',
      )!.many.name;
    expect(long('production').length).toBeLessThanOrEqual(63);
    expect(long('production')).not.toBe(long('staging'));
  });

  it('hashes the liveness lock namespace from the text earlier releases used, quoted as a literal', () => {
    expect(livenessSql(schemaSql()).PROBE).toContain("hashtext('durable_agent.worker_liveness')");
    expect(livenessSql(schemaSql('agents_here')).PROBE).toContain(`hashtext('"agents_here".worker_liveness')`);
    expect(livenessSql(schemaSql("it's")).RETAKE_KEY).toContain(`hashtext('"it''s".worker_liveness')`);
  });
});
