// The structured-output schema subset: which JSON Schema a caller may hand to `start`, the
// snapshot a run keeps of it, and the path-qualified checks a captured value must pass.
// Hand-written walkers, not ajv: ajv cannot give one message per failing node in this walk order.
import { OutputSchemaError } from '../seam/errors';
import { isPlainObject, jsonCopy, jsonViolation } from '../seam/json';
import type {
  StructuredOutputSchema,
  StructuredScalar,
  StructuredSchemaNode,
  StructuredSchemaType,
} from '../seam/structured';

const SCHEMA_TYPES: readonly StructuredSchemaType[] = [
  'object',
  'array',
  'string',
  'number',
  'integer',
  'boolean',
  'null',
];
const SCALAR_TYPES: readonly StructuredSchemaType[] = ['string', 'number', 'integer', 'boolean', 'null'];
const CONSTRAINT_KEYWORDS = ['type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const'];
const ANNOTATION_KEYWORDS = ['description', 'title', 'default', 'examples'];
const KEYWORD_SUBSET = 'subset: type/properties/required/additionalProperties/items/enum/const + annotations';
const PLACED_KEYWORDS: ReadonlyArray<readonly [string, readonly StructuredSchemaType[]]> = [
  ['properties', ['object']],
  ['required', ['object']],
  ['additionalProperties', ['object']],
  ['items', ['array']],
  ['enum', SCALAR_TYPES],
  ['const', SCALAR_TYPES],
];

type PlainObject = Record<string, unknown>;

/**
 * Returns when `schema` is inside the supported subset, narrowing its type; otherwise throws
 * `OutputSchemaError` carrying every violation found, in walk order.
 */
export function assertSupportedOutputSchema(schema: unknown): asserts schema is StructuredOutputSchema {
  const violations: string[] = [];
  checkNode(schema, 'schema', new Set(), violations);
  if (violations.length === 0 && isPlainObject(schema) && schema.type !== 'object') {
    violations.push('schema.type must be "object" (structured output is object-rooted)');
  }
  if (violations.length > 0) throw new OutputSchemaError(violations);
}

/**
 * Checks `value` against a schema that already passed `assertSupportedOutputSchema`. Resolves to
 * the path-qualified violations in walk order (empty means valid); throws on a node whose `type`
 * the assert would have rejected.
 */
export function validateStructuredValue(schema: StructuredOutputSchema, value: unknown): string[] {
  const violations: string[] = [];
  checkValue(schema, value, 'value', violations);
  return violations;
}

/**
 * Asserts `schema` (throwing `OutputSchemaError`, never a clone error) and returns a deep copy
 * that later changes to the caller's object cannot reach.
 */
export function snapshotOutputSchema(schema: unknown): StructuredOutputSchema {
  assertSupportedOutputSchema(schema);
  return jsonCopy(schema) as StructuredOutputSchema;
}

function checkNode(node: unknown, path: string, stack: Set<object>, violations: string[]): void {
  if (!isPlainObject(node)) {
    violations.push(`${path} must be a schema object`);
    return;
  }
  if (stack.has(node)) {
    violations.push(`${path} is circular`);
    return;
  }
  stack.add(node);
  try {
    checkKeys(node, path, violations);
    const type = ownValue(node, 'type');
    if (Array.isArray(type)) {
      violations.push(`${path}.type must be a single type string (type arrays are not supported)`);
      return;
    }
    if (!isSchemaType(type)) {
      violations.push(`${path}.type must be one of object/array/string/number/integer/boolean/null`);
      return;
    }
    for (const [keyword, types] of PLACED_KEYWORDS) {
      if (Object.hasOwn(node, keyword) && !types.includes(type)) {
        violations.push(`${path}.${keyword} is not supported on type "${type}"`);
      }
    }
    if (type === 'object') checkObjectNode(node, path, stack, violations);
    else if (type === 'array') {
      if (Object.hasOwn(node, 'items')) checkNode(node.items, `${path}.items`, stack, violations);
    } else checkScalarNode(node, path, violations);
  } finally {
    stack.delete(node);
  }
}

function checkKeys(node: PlainObject, path: string, violations: string[]): void {
  for (const key of Object.keys(node)) {
    if (CONSTRAINT_KEYWORDS.includes(key)) continue;
    if (ANNOTATION_KEYWORDS.includes(key)) {
      if (jsonViolation(node[key], '', { undefinedProperties: 'refuse' }) !== undefined) {
        violations.push(`${path}.${key} annotation must be JSON data`);
      }
      continue;
    }
    violations.push(`${path}.${key} is not a supported keyword (${KEYWORD_SUBSET})`);
  }
  if (Object.hasOwn(node, 'description') && typeof node.description !== 'string') {
    violations.push(`${path}.description must be a string`);
  }
  if (Object.hasOwn(node, 'title') && typeof node.title !== 'string') {
    violations.push(`${path}.title must be a string`);
  }
}

function checkObjectNode(node: PlainObject, path: string, stack: Set<object>, violations: string[]): void {
  let declared: PlainObject = {};
  if (Object.hasOwn(node, 'properties')) {
    const properties = node.properties;
    if (!isPlainObject(properties)) {
      violations.push(`${path}.properties must be an object of schemas`);
    } else {
      declared = properties;
      for (const key of Object.keys(properties)) {
        checkNode(properties[key], `${path}.properties.${key}`, stack, violations);
      }
    }
  }
  if (Object.hasOwn(node, 'required')) {
    const required = node.required;
    if (!Array.isArray(required) || !required.every((name) => typeof name === 'string')) {
      violations.push(`${path}.required must be an array of strings`);
    } else {
      for (const name of required as string[]) {
        if (!Object.hasOwn(declared, name)) {
          violations.push(`${path}.required names "${name}" which is not in properties`);
        }
      }
    }
  }
  if (Object.hasOwn(node, 'additionalProperties') && typeof node.additionalProperties !== 'boolean') {
    violations.push(`${path}.additionalProperties must be a boolean`);
  }
}

function checkScalarNode(node: PlainObject, path: string, violations: string[]): void {
  if (Object.hasOwn(node, 'enum')) {
    const values = node.enum;
    if (!Array.isArray(values) || values.length === 0 || !values.every(isScalar)) {
      violations.push(`${path}.enum must be a non-empty array of scalars`);
    }
  }
  if (Object.hasOwn(node, 'const') && !isScalar(node.const)) {
    violations.push(`${path}.const must be a scalar`);
  }
}

function checkValue(node: StructuredSchemaNode, value: unknown, path: string, violations: string[]): void {
  const type = node.type;
  switch (type) {
    case 'object':
      checkObjectValue(node, value, path, violations);
      return;
    case 'array':
      if (!Array.isArray(value)) {
        violations.push(`"${path}" must be an array`);
        return;
      }
      if (node.items === undefined) return;
      for (let index = 0; index < value.length; index++) {
        checkValue(node.items, value[index], `${path}[${index}]`, violations);
      }
      return;
    case 'string':
      checkScalarValue(node, value, typeof value === 'string', `"${path}" must be a string`, path, violations);
      return;
    case 'number':
      checkScalarValue(node, value, Number.isFinite(value), `"${path}" must be a finite number`, path, violations);
      return;
    case 'integer':
      checkScalarValue(node, value, Number.isInteger(value), `"${path}" must be an integer`, path, violations);
      return;
    case 'boolean':
      checkScalarValue(node, value, typeof value === 'boolean', `"${path}" must be a boolean`, path, violations);
      return;
    case 'null':
      checkScalarValue(node, value, value === null, `"${path}" must be null`, path, violations);
      return;
    default:
      assertNever(type);
  }
}

function checkObjectValue(node: StructuredSchemaNode, value: unknown, path: string, violations: string[]): void {
  if (!isPlainObject(value)) {
    violations.push(`"${path}" must be an object`);
    return;
  }
  const properties: PlainObject = node.properties ?? {};
  for (const key of node.required ?? []) {
    if (!Object.hasOwn(value, key) || value[key] === undefined) {
      violations.push(`missing required property "${path}.${key}"`);
    }
  }
  for (const key of Object.keys(properties)) {
    if (Object.hasOwn(value, key) && value[key] !== undefined) {
      checkValue(properties[key] as StructuredSchemaNode, value[key], `${path}.${key}`, violations);
    }
  }
  if (node.additionalProperties === false) {
    for (const key of Object.keys(value)) {
      if (!Object.hasOwn(properties, key)) {
        violations.push(`"${path}.${key}" is not a declared property (additionalProperties: false)`);
      }
    }
  }
}

function checkScalarValue(
  node: StructuredSchemaNode,
  value: unknown,
  typeMatches: boolean,
  typeMessage: string,
  path: string,
  violations: string[],
): void {
  if (!typeMatches) {
    violations.push(typeMessage);
    return;
  }
  if (node.enum !== undefined && !node.enum.some((entry) => entry === value)) {
    violations.push(`"${path}" must be one of ${JSON.stringify(node.enum)}`);
    return;
  }
  if (Object.hasOwn(node, 'const') && value !== node.const) {
    violations.push(`"${path}" must be ${JSON.stringify(node.const)}`);
  }
}

function assertNever(type: never): never {
  throw new Error(
    `unsupported schema type ${JSON.stringify(type)} (the schema did not pass assertSupportedOutputSchema)`,
  );
}

function isSchemaType(value: unknown): value is StructuredSchemaType {
  return typeof value === 'string' && (SCHEMA_TYPES as readonly string[]).includes(value);
}

function isScalar(value: unknown): value is StructuredScalar {
  return value === null || typeof value === 'string' || typeof value === 'boolean' || Number.isFinite(value);
}

function ownValue(node: PlainObject, key: string): unknown {
  return Object.hasOwn(node, key) ? node[key] : undefined;
}
