// The project's JSON helpers: what counts as a plain object and as JSON data, a deep copy through
// JSON, and canonical JSON (keys sorted at every level, so equal values have one text and one hash).

/** A plain object: its prototype is `null` or an `Object.prototype` of any realm. Arrays are not. */
export function isPlainObject(value: unknown): value is Record<string, any> {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/**
 * The first place where `value` is not JSON data (finite numbers, strings, booleans, null, and
 * arrays and plain objects of them, without cycles), or undefined when it all is. An undefined
 * object property is dropped by JSON and passes unless `undefinedProperties` is `'refuse'`; an
 * undefined array slot never passes.
 */
export function jsonViolation(
  value: unknown,
  path: string,
  options: { undefinedProperties?: 'drop' | 'refuse' } = {},
  stack: object[] = [],
): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path} must be a finite number`;
  if (typeof value !== 'object') return `${path} must be JSON data (got ${describeValue(value)})`;
  if (stack.includes(value)) return `${path} is circular`;
  if (!Array.isArray(value) && !isPlainObject(value)) {
    return `${path} must be a plain object or array (got ${describeValue(value)})`;
  }
  const dropUndefined = !Array.isArray(value) && options.undefinedProperties !== 'refuse';
  stack.push(value);
  try {
    const entries: [string, unknown][] = Array.isArray(value)
      ? Array.from(value, (item, index) => [`${path}[${index}]`, item])
      : Object.keys(value).map((key) => [`${path}.${key}`, (value as Record<string, unknown>)[key]]);
    for (const [childPath, item] of entries) {
      if (item === undefined && dropUndefined) continue;
      const violation = jsonViolation(item, childPath, options, stack);
      if (violation) return violation;
    }
    return undefined;
  } finally {
    stack.pop();
  }
}

/** A deep copy through JSON: what a value becomes once it has crossed the wire. */
export function jsonCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** `value` without its undefined properties, as JSON would carry it. */
export function omitUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined)) as T;
}

/**
 * `value` as JSON with every object's keys sorted (its undefined properties left out), the same
 * text for the same data whatever order it was built in: what the audit chain hashes and the
 * idempotency fingerprints compare. Data nested as deep as JSON.parse takes it is written too:
 * past RECURSION_DEPTH levels, without recursion (a recursive writer ran out of stack at 2,366
 * objects deep).
 */
export function canonicalJson(value: unknown): string {
  return canonicalAt(value, 0);
}

/** How deep the writer recurses before it goes on with a stack of its own (twice as slow). */
const RECURSION_DEPTH = 500;

function canonicalAt(value: unknown, depth: number): string {
  if (depth >= RECURSION_DEPTH && (Array.isArray(value) || isPlainObject(value))) return canonicalDeep(value);
  if (Array.isArray(value)) return `[${value.map((item) => canonicalAt(item, depth + 1)).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value)
      .filter((key) => value[key] !== undefined)
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalAt(value[key], depth + 1)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** `canonicalJson` of an array or a plain object, without recursion. */
function canonicalDeep(value: unknown): string {
  // Work in last-in first-out order: text to write as it is, or a value to write, with where it
  // stands (an array's element writes nothing for undefined, an object's member "undefined").
  type Work = { text: string } | { value: unknown; in: 'element' | 'member' };
  const parts: string[] = [];
  const work: Work[] = [{ value, in: 'element' }];
  while (work.length > 0) {
    const next = work.pop()!;
    if ('text' in next) {
      parts.push(next.text);
      continue;
    }
    const item = next.value;
    if (Array.isArray(item)) {
      work.push({ text: ']' });
      for (let index = item.length - 1; index >= 0; index--) {
        // A hole is written as nothing, as Array.prototype.map and join leave it.
        if (index in item) work.push({ value: item[index], in: 'element' });
        if (index > 0) work.push({ text: ',' });
      }
      work.push({ text: '[' });
    } else if (isPlainObject(item)) {
      const keys = Object.keys(item)
        .filter((key) => item[key] !== undefined)
        .sort();
      work.push({ text: '}' });
      for (let index = keys.length - 1; index >= 0; index--) {
        work.push({ value: item[keys[index]!], in: 'member' });
        work.push({ text: `${index > 0 ? ',' : ''}${JSON.stringify(keys[index])}:` });
      }
      work.push({ text: '{' });
    } else {
      const text = JSON.stringify(item) as string | undefined;
      if (text !== undefined) parts.push(text);
      else if (next.in === 'member') parts.push('undefined');
    }
  }
  return parts.join('');
}

/** A short description of a value for an error message: `1.5`, `"x"`, `a function`, `Date`. */
export function describeValue(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return 'a function';
  return (value as object).constructor?.name ?? typeof value;
}
