/**
 * How the project's connections parse values. They are given to every pool and client it creates
 * (pg's `types` option) instead of being set on pg's global registry, which an application that
 * embeds the runtime shares with us: its own pools keep pg's defaults (int8 and numeric as strings).
 */
import pg from 'pg';

const asNumber = (text: string) => Number(text);

/** numeric (money) and int8 (token counters) as JS numbers: costs and counts stay far below 2^53. */
const PARSERS = new Map<number, (text: string) => unknown>([
  [pg.types.builtins.NUMERIC, asNumber],
  [pg.types.builtins.INT8, asNumber],
]);

export const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    (format !== 'binary' && PARSERS.get(oid)) || pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};
