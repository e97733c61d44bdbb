/**
 * Encryption at rest of what runs carry (prompts, tool results, outputs, events), with AES-256-GCM
 * through node:crypto. A value is sealed where it is stored: the stored string is an envelope
 *
 *     da.enc:1:<form>:<key id>:<base64url of 12-byte IV, ciphertext, 16-byte tag>
 *
 * `form` says what was sealed: `t` a text, `j` a JSON value (its JSON text). The key id travels with
 * each value, so keys can be rotated: the first key of a keyring seals, every key of it opens. The
 * authenticated data binds the ciphertext to its form and key id.
 *
 * Only payloads are sealed, never what queries filter or join on (ids, statuses, times, counts, a
 * content block's type and id): see sealed-columns.ts for which parts of which column. Opening looks
 * at those positions only, so a plain field elsewhere (a tool's name, an id) is never taken for a
 * sealed one, whatever it holds.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { EncryptionKey } from '../config/encryption-keys.ts';
import { EncryptionError } from '../domain/errors.ts';

export const ENVELOPE_PREFIX = 'da.enc:1:';
/** What every stored form other than a plain value starts with. */
export const MARK = 'da.';
/** Before a plain value that would otherwise read as an envelope or as escaped. */
const RAW = 'da.raw:';
const escaped = (plain: string) => (plain.startsWith('da.enc:') || plain.startsWith(RAW) ? RAW + plain : plain);
const ENVELOPE = /^da\.enc:1:([tj]):([A-Za-z0-9_-]{1,64}):([A-Za-z0-9_-]+)$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What the column rules of sealed-columns.ts seal with: a Sealer, or a rotation's resealing. */
export interface FieldSealer {
  readonly enabled: boolean;
  text(plain: string): string;
  json(value: unknown): unknown;
}

/**
 * Seals and opens the values of payload positions (sealed-columns.ts says which). Without a key,
 * values are stored plain, except that a plain string which itself starts like an envelope (or like
 * the escape) is stored behind the escape `da.raw:`, so that no stored plain value is ever taken for
 * a sealed one. `NO_ENCRYPTION` seals nothing and refuses to open a sealed value.
 */
export class Sealer implements FieldSealer {
  private readonly byId: ReadonlyMap<string, Buffer>;
  private readonly sealing: EncryptionKey | null;

  constructor(keys: readonly EncryptionKey[] | null) {
    this.byId = new Map((keys ?? []).map((k) => [k.id, k.key]));
    this.sealing = keys?.[0] ?? null;
  }

  /** Whether new values are sealed. */
  get enabled(): boolean {
    return this.sealing !== null;
  }

  /** The id of the key that seals new values; null without encryption. */
  get keyId(): string | null {
    return this.sealing?.id ?? null;
  }

  /** Every key id this sealer can open. */
  get keyIds(): readonly string[] {
    return [...this.byId.keys()];
  }

  /** A text as stored: sealed when encryption is on. */
  text(plain: string): string;
  text(plain: string | null): string | null;
  text(plain: string | null): string | null {
    if (plain === null) return null;
    return this.sealing === null ? escaped(plain) : this.seal('t', plain);
  }

  /** A JSON value as stored: sealed into one string when encryption is on (undefined and null stay). */
  json<T>(value: T): T | string;
  json(value: unknown): unknown;
  json<T>(value: T): T | string {
    if (value === undefined || value === null) return value;
    if (this.sealing === null) return (typeof value === 'string' ? escaped(value) : value) as T;
    return this.seal('j', JSON.stringify(value));
  }

  /**
   * Bytes as stored (a workspace file's content): sealed when encryption is on, as IV, ciphertext and
   * tag, with the id of the key that sealed them (null: stored plain). The key id is kept beside the
   * bytes, not inside them, so a plain content is never mistaken for a sealed one.
   */
  bytes(plain: Buffer): { content: Buffer; keyId: string | null } {
    if (this.sealing === null) return { content: plain, keyId: null };
    return { content: this.encrypt(plain, 'b'), keyId: this.sealing.id };
  }

  /** Stored bytes opened (see `bytes`). */
  openBytes(stored: Buffer, keyId: string | null): Buffer {
    return keyId === null ? stored : this.decrypt(stored, 'b', keyId, 'file');
  }

  /** Whether `text` is an envelope this sealer would open (or refuse to). */
  static isSealed(text: string): boolean {
    return text.startsWith(ENVELOPE_PREFIX) && ENVELOPE.test(text);
  }

  /** A stored text opened: `text` read back. */
  openText(stored: string): string;
  openText(stored: string | null): string | null;
  openText(stored: string | null): string | null {
    if (stored === null) return null;
    const opened = this.open(stored);
    return typeof opened === 'string' ? opened : JSON.stringify(opened);
  }

  /** A stored value opened: `text` or `json` read back. Only its top is looked at, never inside it. */
  open<T>(stored: T): T {
    if (typeof stored !== 'string' || !stored.startsWith(MARK)) return stored;
    if (stored.startsWith(RAW)) return stored.slice(RAW.length) as T;
    if (stored.startsWith(ENVELOPE_PREFIX)) return this.openEnvelope(stored) as T;
    return stored;
  }

  /**
   * A stored field as the sealing key would store it (for rotation): an envelope of that key as it
   * is, any other envelope opened and sealed again, a plain value sealed.
   */
  readonly resealing: FieldSealer = {
    enabled: true,
    text: (stored) => this.reseal(stored) as string,
    json: (stored) => this.reseal(stored),
  };

  /** The key id of a stored envelope; null for anything else. */
  static keyIdOf(stored: unknown): string | null {
    return typeof stored === 'string' ? (ENVELOPE.exec(stored)?.[2] ?? null) : null;
  }

  private reseal(stored: unknown): unknown {
    if (stored === null || stored === undefined) return stored;
    if (typeof stored === 'string' && Sealer.keyIdOf(stored) === this.sealing!.id) return stored;
    if (typeof stored === 'string' && Sealer.isSealed(stored)) {
      const opened = this.openEnvelope(stored);
      return stored[ENVELOPE_PREFIX.length] === 't' ? this.seal('t', opened as string) : this.seal('j', JSON.stringify(opened));
    }
    const plain = this.open(stored);
    return typeof plain === 'string' ? this.seal('t', plain) : this.seal('j', JSON.stringify(plain));
  }

  private seal(form: 't' | 'j', plain: string): string {
    return `${ENVELOPE_PREFIX}${form}:${this.sealing!.id}:${this.encrypt(Buffer.from(plain, 'utf8'), form).toString('base64url')}`;
  }

  /** IV, ciphertext and tag of `plain` under the sealing key; the authenticated data binds the form and the key id. */
  private encrypt(plain: Buffer, form: 't' | 'j' | 'b'): Buffer {
    const { id, key } = this.sealing!;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(`${form}:${id}`));
    return Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  }

  /** What `encrypt` sealed with key `id`; `what` names it in the errors (a value, a file). */
  private decrypt(bytes: Buffer, form: 't' | 'j' | 'b', id: string, what: 'value' | 'file'): Buffer {
    const key = this.byId.get(id);
    if (!key) {
      throw new EncryptionError(
        this.sealing === null
          ? `a stored ${what} is encrypted (key ${id}) and no ENCRYPTION_KEY is set`
          : `a stored ${what} is encrypted with key ${id}, which ENCRYPTION_KEYS does not have`,
      );
    }
    if (bytes.length < IV_BYTES + TAG_BYTES) throw new EncryptionError(`a stored ${what} sealed with key ${id} is cut short`);
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(`${form}:${id}`));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new EncryptionError(`a stored ${what} sealed with key ${id} does not open: altered, or another key under the same id`);
    }
  }

  private openEnvelope(stored: string): unknown {
    const m = ENVELOPE.exec(stored);
    if (!m) return stored;
    const [, form, id, body] = m as unknown as [string, 't' | 'j', string, string];
    const plain = this.decrypt(Buffer.from(body, 'base64url'), form, id, 'value').toString('utf8');
    return form === 't' ? plain : (JSON.parse(plain) as unknown);
  }
}

export const NO_ENCRYPTION = new Sealer(null);
