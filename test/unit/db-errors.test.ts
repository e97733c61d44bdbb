import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../src/domain/errors.ts';
import { classifyDatabaseError, describeDatabaseError } from '../../src/core/database-errors.ts';

const pgError = (code: string, message = 'server says no') => Object.assign(new Error(message), { code });

describe('classifyDatabaseError', () => {
  it.each([
    ['08006', 'connection failure'],
    ['08P01', 'protocol violation'],
    ['57P01', 'admin shutdown'],
    ['57P02', 'crash shutdown'],
    ['57P03', 'the server is starting up'],
    ['53300', 'too many connections'],
    ['40001', 'serialization failure'],
    ['40P01', 'deadlock'],
  ])('%s (%s) is transient', (code) => {
    expect(classifyDatabaseError(pgError(code))).toBe('transient');
  });

  it.each([
    ['22021', 'a NUL in text'],
    ['22003', 'a number out of range'],
    ['22P02', 'invalid input syntax'],
    ['23505', 'a duplicate key'],
    ['23514', 'a check constraint'],
    ['42703', 'an undefined column'],
    ['54000', 'a program limit'],
  ])('%s (%s) is permanent', (code) => {
    expect(classifyDatabaseError(pgError(code))).toBe('permanent');
  });

  it("treats socket errors and the driver's own connection errors as transient", () => {
    for (const code of ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'])
      expect(classifyDatabaseError(pgError(code, `connect ${code}`))).toBe('transient');
    expect(classifyDatabaseError(new Error('Connection terminated unexpectedly'))).toBe('transient');
    expect(classifyDatabaseError(new Error('timeout exceeded when trying to connect'))).toBe('transient');
  });

  it('makes no claim about anything else', () => {
    expect(classifyDatabaseError(new LeaseLostError('r', 'w'))).toBe('other');
    expect(classifyDatabaseError(new TypeError('x is undefined'))).toBe('other');
    expect(classifyDatabaseError(pgError('57014', 'canceling statement due to statement timeout'))).toBe('other');
    expect(classifyDatabaseError('a string')).toBe('other');
    expect(classifyDatabaseError(pgError('ENOENT'))).toBe('other');
  });
});

describe('describeDatabaseError', () => {
  it('keeps the message short and names the SQLSTATE', () => {
    expect(describeDatabaseError(pgError('22021', 'invalid byte sequence for encoding "UTF8": 0x00'))).toBe(
      'invalid byte sequence for encoding "UTF8": 0x00 (SQLSTATE 22021)',
    );
    expect(describeDatabaseError(pgError('22001', 'x'.repeat(1000))).length).toBeLessThan(330);
  });
});
