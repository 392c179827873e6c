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

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value)
      .filter((key) => value[key] !== undefined)
      .sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A short description of a value for an error message: `1.5`, `"x"`, `a function`, `Date`. */
export function describeValue(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return 'a function';
  return (value as object).constructor?.name ?? typeof value;
}
