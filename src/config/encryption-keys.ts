/** ENCRYPTION_KEY and ENCRYPTION_KEYS, as the configuration reads them (store/encryption.ts uses the keys). */
import { createHash } from 'node:crypto';

const KEY_BYTES = 32;

/** One key: `id` is stored with each value it seals; the key itself never leaves the process. */
export interface EncryptionKey {
  readonly id: string;
  readonly key: Buffer;
}

/**
 * ENCRYPTION_KEY (one key, base64 of 32 bytes; its id is derived from it) or ENCRYPTION_KEYS
 * (`id1:key1,id2:key2`, the first sealing new values). Throws a message that never quotes a key.
 */
export function parseEncryptionKeys(single: string | undefined, list: string | undefined): EncryptionKey[] | null {
  if (single !== undefined && list !== undefined) throw new Error('set ENCRYPTION_KEY or ENCRYPTION_KEYS, not both');
  if (single !== undefined) {
    const key = decodeKey(single, 'ENCRYPTION_KEY');
    return [{ id: `k${createHash('sha256').update(key).digest('hex').slice(0, 8)}`, key }];
  }
  if (list === undefined) return null;
  const keys = list.split(',').map((part, i) => {
    const at = part.indexOf(':');
    const id = part.slice(0, at).trim();
    if (at < 0 || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) {
      throw new Error(`ENCRYPTION_KEYS: entry ${i + 1} must be id:key, the id of letters, digits, _ or - (at most 64)`);
    }
    return { id, key: decodeKey(part.slice(at + 1).trim(), `ENCRYPTION_KEYS: key ${id}`) };
  });
  const ids = new Set(keys.map((k) => k.id));
  if (ids.size !== keys.length) throw new Error('ENCRYPTION_KEYS: each id may appear once');
  return keys;
}

function decodeKey(text: string, what: string): Buffer {
  const key = Buffer.from(text, 'base64');
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text) || key.length !== KEY_BYTES) {
    throw new Error(`${what} must be ${KEY_BYTES} bytes in base64 (e.g. the output of \`openssl rand -base64 32\`)`);
  }
  return key;
}
