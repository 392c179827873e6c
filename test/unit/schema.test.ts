import Ajv from 'ajv';
import { runInNewContext } from 'node:vm';
import {
  assertSupportedOutputSchema,
  HarnessError,
  OutputSchemaError,
  snapshotOutputSchema,
  type StructuredOutputSchema,
  type StructuredSchemaNode,
  SubagentError,
  validateStructuredValue,
} from '../../src';

const UNSUPPORTED =
  'is not a supported keyword (subset: type/properties/required/additionalProperties/items/enum/const + annotations)';
const TYPE_ONE_OF = 'type must be one of object/array/string/number/integer/boolean/null';
const ROOT_NOT_OBJECT = 'schema.type must be "object" (structured output is object-rooted)';

function violationsOf(schema: unknown): string[] {
  try {
    assertSupportedOutputSchema(schema);
  } catch (err) {
    if (err instanceof OutputSchemaError) return err.violations;
    throw err;
  }
  return [];
}

function cyclicProperties(): unknown {
  const schema: { type: string; properties: Record<string, unknown> } = { type: 'object', properties: {} };
  schema.properties.self = schema;
  return schema;
}

class SchemaLike {
  type = 'string';
}

const everyKeyword: StructuredOutputSchema = {
  type: 'object',
  title: 'Finding',
  description: 'One finding of a review.',
  default: { file: 'a.ts', line: 1 },
  examples: [{ file: 'a.ts', line: 1, tags: ['x'] }],
  properties: {
    file: { type: 'string', description: 'Path.' },
    line: { type: 'integer', title: 'Line', default: 1 },
    score: { type: 'number', enum: [0.5, 1] },
    severity: { type: 'string', enum: ['low', 'high'] },
    kind: { type: 'string', const: 'bug' },
    fixed: { type: 'boolean', const: false },
    note: { type: 'null', enum: [null] },
    tags: { type: 'array', items: { type: 'string' } },
    extra: { type: 'array' },
    location: {
      type: 'object',
      properties: { start: { type: 'integer' }, end: { type: 'integer' } },
      required: ['start'],
      additionalProperties: false,
    },
  },
  required: ['file', 'line'],
  additionalProperties: true,
};

describe('§3.2 assertSupportedOutputSchema', () => {
  it('§7.2 accepts a representative schema that uses every keyword and annotation', () => {
    expect(() => assertSupportedOutputSchema(everyKeyword)).not.toThrow();
    expect(violationsOf(everyKeyword)).toEqual([]);
  });

  it('accepts a bare object schema', () => {
    expect(violationsOf({ type: 'object' })).toEqual([]);
  });

  it.each<[string, unknown, string[]]>([
    ['a string root', 'nope', ['schema must be a schema object']],
    ['a null root', null, ['schema must be a schema object']],
    ['an array root', [], ['schema must be a schema object']],
    ['an empty object', {}, [`schema.${TYPE_ONE_OF}`]],
    [
      'a non-object property node',
      { type: 'object', properties: { a: 'str' } },
      ['schema.properties.a must be a schema object'],
    ],
    [
      'a type array',
      { type: ['string', 'null'] },
      ['schema.type must be a single type string (type arrays are not supported)'],
    ],
    [
      'items on an object',
      { type: 'object', items: { type: 'string' } },
      ['schema.items is not supported on type "object"'],
    ],
    [
      'properties on a string',
      { type: 'object', properties: { a: { type: 'string', properties: {} } } },
      ['schema.properties.a.properties is not supported on type "string"'],
    ],
    [
      'a required name that is not declared',
      { type: 'object', required: ['a'] },
      ['schema.required names "a" which is not in properties'],
    ],
    [
      'a non-boolean additionalProperties',
      { type: 'object', additionalProperties: {} },
      ['schema.additionalProperties must be a boolean'],
    ],
    ['a function annotation', { type: 'object', default: () => 1 }, ['schema.default annotation must be JSON data']],
    ['a cyclic properties.self', cyclicProperties(), ['schema.properties.self is circular']],
    [
      'three problems at once',
      { type: 'object', pattern: 'x', properties: { a: { type: 'weird' }, b: { type: 'string', minimum: 1 } } },
      [
        `schema.pattern ${UNSUPPORTED}`,
        `schema.properties.a.${TYPE_ONE_OF}`,
        `schema.properties.b.minimum ${UNSUPPORTED}`,
      ],
    ],
    ['a string root type', { type: 'string' }, [ROOT_NOT_OBJECT]],
    ['an array root type with legal items', { type: 'array', items: { type: 'string' } }, [ROOT_NOT_OBJECT]],
  ])('§7.2 rejects %s with the exact violations', (_name, schema, expected) => {
    expect(violationsOf(schema)).toEqual(expected);
  });

  it.each<[string, unknown]>([
    ['an empty array', []],
    ['an array holding an object', [{}]],
    ['a string', 'x'],
    ['an array holding NaN', [NaN]],
    ['an array holding Infinity', ['a', Infinity]],
    ['an array holding undefined', [undefined]],
    ['null', null],
  ])('§7.2 rejects enum as %s', (_name, enumValue) => {
    expect(violationsOf({ type: 'object', properties: { s: { type: 'string', enum: enumValue } } })).toEqual([
      'schema.properties.s.enum must be a non-empty array of scalars',
    ]);
  });

  it.each<[string, unknown]>([
    ['an object', {}],
    ['an array', ['a']],
    ['NaN', NaN],
    ['-Infinity', -Infinity],
    ['undefined', undefined],
    ['a function', () => 'a'],
  ])('§7.2 rejects const as %s', (_name, constValue) => {
    expect(violationsOf({ type: 'object', properties: { s: { type: 'string', const: constValue } } })).toEqual([
      'schema.properties.s.const must be a scalar',
    ]);
  });

  it.each(['oneOf', 'anyOf', 'allOf', 'not', 'pattern', 'minimum', 'maxLength', '$ref'])(
    '§7.2 rejects %s as an unsupported keyword',
    (keyword) => {
      expect(violationsOf({ type: 'object', [keyword]: {} })).toEqual([`schema.${keyword} ${UNSUPPORTED}`]);
    },
  );

  it.each<[string, unknown, string]>([
    ['a missing type', { properties: {} }, `schema.${TYPE_ONE_OF}`],
    ['an unknown type', { type: 'tuple' }, `schema.${TYPE_ONE_OF}`],
    ['a non-string type', { type: 1 }, `schema.${TYPE_ONE_OF}`],
    ['a type array', { type: ['object'] }, 'schema.type must be a single type string (type arrays are not supported)'],
  ])('stops at a node with %s after the key checks', (_name, schema, message) => {
    expect(violationsOf(schema)).toEqual([message]);
  });

  it('reports key violations of a node before its type violation', () => {
    expect(violationsOf({ anyOf: [], title: 3 })).toEqual([
      `schema.anyOf ${UNSUPPORTED}`,
      'schema.title must be a string',
      `schema.${TYPE_ONE_OF}`,
    ]);
  });

  it.each<[string, Record<string, unknown>, string[]]>([
    [
      'properties on an array',
      { type: 'array', properties: {} },
      ['schema.properties.x.properties is not supported on type "array"'],
    ],
    [
      'required on a number',
      { type: 'number', required: [] },
      ['schema.properties.x.required is not supported on type "number"'],
    ],
    [
      'additionalProperties on a boolean',
      { type: 'boolean', additionalProperties: false },
      ['schema.properties.x.additionalProperties is not supported on type "boolean"'],
    ],
    [
      'items on an integer',
      { type: 'integer', items: { type: 'string' } },
      ['schema.properties.x.items is not supported on type "integer"'],
    ],
    [
      'enum on an object',
      { type: 'object', enum: ['a'] },
      ['schema.properties.x.enum is not supported on type "object"'],
    ],
    [
      'const on an array',
      { type: 'array', const: 'a' },
      ['schema.properties.x.const is not supported on type "array"'],
    ],
    [
      'several misplaced keywords in keyword order, then the type checks',
      { type: 'null', const: null, items: {}, properties: 1, enum: 'bad' },
      [
        'schema.properties.x.properties is not supported on type "null"',
        'schema.properties.x.items is not supported on type "null"',
        'schema.properties.x.enum must be a non-empty array of scalars',
      ],
    ],
  ])('§7.2 rejects %s, a keyword on the wrong type', (_name, node, expected) => {
    expect(violationsOf({ type: 'object', properties: { x: node } })).toEqual(expected);
  });

  it('does not look inside a misplaced keyword', () => {
    expect(violationsOf({ type: 'object', items: 'not even a schema' })).toEqual([
      'schema.items is not supported on type "object"',
    ]);
  });

  it.each<[string, unknown]>([
    ['a string', 'a'],
    ['an array holding a number', ['a', 1]],
    ['an object', { a: true }],
    ['null', null],
  ])('§7.2 rejects required as %s', (_name, required) => {
    expect(violationsOf({ type: 'object', properties: { a: { type: 'string' } }, required })).toEqual([
      'schema.required must be an array of strings',
    ]);
  });

  it('§7.2 reports every undeclared required name in order', () => {
    expect(violationsOf({ type: 'object', properties: { b: { type: 'string' } }, required: ['a', 'b', 'c'] })).toEqual([
      'schema.required names "a" which is not in properties',
      'schema.required names "c" which is not in properties',
    ]);
  });

  it.each<[string, unknown]>([
    ['an array', []],
    ['a string', 'a'],
    ['null', null],
    ['a Map', new Map()],
  ])('rejects properties as %s', (_name, properties) => {
    expect(violationsOf({ type: 'object', properties })).toEqual(['schema.properties must be an object of schemas']);
  });

  it('treats required names as undeclared when properties is not an object', () => {
    expect(violationsOf({ type: 'object', properties: [], required: ['length'] })).toEqual([
      'schema.properties must be an object of schemas',
      'schema.required names "length" which is not in properties',
    ]);
  });

  it.each<[string, unknown]>([
    ['a string', 'false'],
    ['a number', 0],
    ['null', null],
  ])('§7.2 rejects additionalProperties as %s', (_name, additionalProperties) => {
    expect(violationsOf({ type: 'object', additionalProperties })).toEqual([
      'schema.additionalProperties must be a boolean',
    ]);
  });

  it.each<[string, Record<string, unknown>, string[]]>([
    ['a numeric description', { description: 1 }, ['schema.description must be a string']],
    ['a null title', { title: null }, ['schema.title must be a string']],
    ['an object title', { title: { text: 'x' } }, ['schema.title must be a string']],
    [
      'a function description',
      { description: () => 'x' },
      ['schema.description annotation must be JSON data', 'schema.description must be a string'],
    ],
    [
      'an undefined title',
      { title: undefined },
      ['schema.title annotation must be JSON data', 'schema.title must be a string'],
    ],
  ])('§7.2 rejects %s, a non-string or non-JSON annotation', (_name, annotations, expected) => {
    expect(violationsOf({ type: 'object', ...annotations })).toEqual(expected);
  });

  it.each<[string, unknown]>([
    ['a function', () => 1],
    ['an array holding undefined', [undefined]],
    ['an array holding Infinity', [Infinity]],
    ['NaN', NaN],
    ['undefined', undefined],
    ['a bigint', 1n],
    ['a symbol', Symbol('x')],
    ['a nested function', { a: [{ b: () => 1 }] }],
    ['a Date', new Date(0)],
    ['a Map', new Map([['a', 1]])],
    ['a class instance', new SchemaLike()],
    // eslint-disable-next-line no-sparse-arrays -- the hole is the case under test
    ['a sparse array', [1, , 3]],
    [
      'a cycle',
      (() => {
        const cycle: Record<string, unknown> = { a: 1 };
        cycle.self = cycle;
        return cycle;
      })(),
    ],
  ])('§7.2 rejects a default that is %s as non-JSON data', (_name, payload) => {
    expect(violationsOf({ type: 'object', default: payload })).toEqual(['schema.default annotation must be JSON data']);
  });

  it('§7.2 accepts JSON object and array annotations, including a shared non-cyclic payload', () => {
    const shared = { x: [1, 'a', true, null, { y: -0.5 }] };
    expect(
      violationsOf({
        type: 'object',
        default: { a: shared, b: shared, c: Object.assign(Object.create(null), { z: 1 }) },
        examples: [shared, shared, [], {}],
        properties: { s: { type: 'string', default: 'x', examples: ['a', 'b'] } },
      }),
    ).toEqual([]);
  });

  it('§7.2 reports the path of a circular node deeper than the root', () => {
    const inner: Record<string, unknown> = { type: 'array' };
    inner.items = { type: 'object', properties: { back: inner } };
    expect(violationsOf({ type: 'object', properties: { list: inner } })).toEqual([
      'schema.properties.list.items.properties.back is circular',
    ]);
  });

  it('§7.2 accepts the same sub-schema object in two sibling positions', () => {
    const shared = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] };
    expect(
      violationsOf({ type: 'object', properties: { a: shared, b: shared, list: { type: 'array', items: shared } } }),
    ).toEqual([]);
  });

  it('reports each violation of a shared sub-schema once per position', () => {
    const shared = { type: 'string', minimum: 1 };
    expect(violationsOf({ type: 'object', properties: { a: shared, b: shared } })).toEqual([
      `schema.properties.a.minimum ${UNSUPPORTED}`,
      `schema.properties.b.minimum ${UNSUPPORTED}`,
    ]);
  });

  it('§7.2 collects violations across nesting levels in walk order', () => {
    expect(
      violationsOf({
        type: 'object',
        $schema: 'x',
        properties: {
          a: {
            type: 'array',
            items: { type: 'object', properties: { b: { type: 'string', enum: [] } }, required: ['c'] },
          },
          d: { type: 'number', const: {} },
        },
        required: 'd',
        additionalProperties: 'no',
      }),
    ).toEqual([
      `schema.$schema ${UNSUPPORTED}`,
      'schema.properties.a.items.properties.b.enum must be a non-empty array of scalars',
      'schema.properties.a.items.required names "c" which is not in properties',
      'schema.properties.d.const must be a scalar',
      'schema.required must be an array of strings',
      'schema.additionalProperties must be a boolean',
    ]);
  });

  it('§7.2 adds the object-rooted message only when nothing else is wrong', () => {
    expect(violationsOf({ type: 'string', pattern: 'x' })).toEqual([`schema.pattern ${UNSUPPORTED}`]);
    expect(violationsOf({ type: 'array', items: { type: 'string', minimum: 1 } })).toEqual([
      `schema.items.minimum ${UNSUPPORTED}`,
    ]);
    expect(violationsOf({ type: 'integer', enum: [1, 2] })).toEqual([ROOT_NOT_OBJECT]);
  });

  describe('plain JSON objects only', () => {
    it.each<[string, unknown]>([
      ['a Date', new Date(0)],
      ['a Map', new Map([['type', 'string']])],
      ['a class instance', new SchemaLike()],
      ['an array', [{ type: 'string' }]],
      ['an object with a non-plain prototype', Object.create({ type: 'string' })],
    ])('rejects %s as a schema node', (_name, node) => {
      expect(violationsOf({ type: 'object', properties: { a: node } })).toEqual([
        'schema.properties.a must be a schema object',
      ]);
      expect(violationsOf(node)).toEqual(['schema must be a schema object']);
    });

    it('rejects a Date as the items schema', () => {
      expect(violationsOf({ type: 'object', properties: { a: { type: 'array', items: new Date(0) } } })).toEqual([
        'schema.properties.a.items must be a schema object',
      ]);
    });

    it('accepts null-prototype nodes', () => {
      const properties = Object.assign(Object.create(null), { a: { type: 'string' } });
      const node = Object.assign(Object.create(null), { type: 'object', properties });
      expect(violationsOf(node)).toEqual([]);
    });

    it('accepts plain objects from another realm', () => {
      const foreign = runInNewContext(
        '({ type: "object", properties: { a: { type: "string", enum: ["x"] } }, required: ["a"], default: { a: "x" } })',
      );
      expect(Object.getPrototypeOf(foreign)).not.toBe(Object.prototype);
      expect(violationsOf(foreign)).toEqual([]);
    });

    it.each(['toString', 'constructor', 'hasOwnProperty', '__proto__'])(
      'does not count the inherited name %s as a declared property',
      (name) => {
        expect(violationsOf({ type: 'object', properties: {}, required: [name] })).toEqual([
          `schema.required names "${name}" which is not in properties`,
        ]);
        expect(violationsOf({ type: 'object', required: [name] })).toEqual([
          `schema.required names "${name}" which is not in properties`,
        ]);
      },
    );

    it('counts an own property named toString as declared', () => {
      expect(
        violationsOf({ type: 'object', properties: { toString: { type: 'string' } }, required: ['toString'] }),
      ).toEqual([]);
    });
  });
});

describe('§1.10 OutputSchemaError', () => {
  it('carries the violations, the code, the name and the joined message', () => {
    let caught: unknown;
    try {
      assertSupportedOutputSchema({ type: 'object', pattern: 'x', required: ['a'] });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(OutputSchemaError);
    expect(caught).toBeInstanceOf(SubagentError);
    expect(caught).toBeInstanceOf(HarnessError);
    const error = caught as OutputSchemaError;
    expect(error.name).toBe('OutputSchemaError');
    expect(error.code).toBe('UNSUPPORTED_SCHEMA');
    expect(error.violations).toEqual([
      `schema.pattern ${UNSUPPORTED}`,
      'schema.required names "a" which is not in properties',
    ]);
    expect(error.message).toBe(
      `unsupported output schema: schema.pattern ${UNSUPPORTED}; schema.required names "a" which is not in properties`,
    );
  });

  it('copies the violations it is given', () => {
    const violations = ['schema must be a schema object'];
    const error = new OutputSchemaError(violations);
    violations.push('later');
    expect(error.violations).toEqual(['schema must be a schema object']);
    expect(error.message).toBe('unsupported output schema: schema must be a schema object');
  });
});

describe('§3.3 validateStructuredValue', () => {
  const finding: StructuredOutputSchema = {
    type: 'object',
    properties: {
      file: { type: 'string' },
      line: { type: 'integer' },
      severity: { type: 'string', enum: ['low', 'high'] },
      kind: { type: 'string', const: 'bug' },
    },
    required: ['file', 'line'],
  };

  beforeAll(() => {
    assertSupportedOutputSchema(finding);
  });

  it('§7.2 returns no violations for a fully valid value', () => {
    expect(validateStructuredValue(finding, { file: 'a.ts', line: 3, severity: 'high', kind: 'bug' })).toEqual([]);
    expect(
      validateStructuredValue(everyKeyword, {
        file: 'a.ts',
        line: 1,
        score: 0.5,
        severity: 'low',
        kind: 'bug',
        fixed: false,
        note: null,
        tags: ['x', 'y'],
        extra: [1, { a: [] }, null],
        location: { start: 1, end: 2 },
        unlisted: { anything: true },
      }),
    ).toEqual([]);
  });

  it.each<[string, unknown, string[]]>([
    [
      'violations from several branches in walk order',
      { line: 'x', severity: 'mid' },
      [
        'missing required property "value.file"',
        '"value.line" must be an integer',
        '"value.severity" must be one of ["low","high"]',
      ],
    ],
    ['a const mismatch', { file: 'a', line: 1, kind: 'feature' }, ['"value.kind" must be "bug"']],
    [
      'missing required properties in required order',
      {},
      ['missing required property "value.file"', 'missing required property "value.line"'],
    ],
    ['a required key present but undefined', { file: undefined, line: 1 }, ['missing required property "value.file"']],
    ['a string root', 'str', ['"value" must be an object']],
    ['an array root', [{ file: 'a', line: 1 }], ['"value" must be an object']],
    ['a null root', null, ['"value" must be an object']],
    ['a non-integer line', { file: 'a', line: 1.5 }, ['"value.line" must be an integer']],
    ['a string line', { file: 'a', line: 'x' }, ['"value.line" must be an integer']],
  ])('§7.2 reports %s', (_name, value, expected) => {
    expect(validateStructuredValue(finding, value)).toEqual(expected);
  });

  it('§7.2 skips declared properties whose value is undefined', () => {
    expect(validateStructuredValue(finding, { file: 'a', line: 1, severity: undefined, kind: undefined })).toEqual([]);
  });

  it.each<[string, StructuredOutputSchema['properties'], unknown, string[]]>([
    ['string', { p: { type: 'string' } }, 1, ['"value.p" must be a string']],
    ['number (a string)', { p: { type: 'number' } }, '1', ['"value.p" must be a finite number']],
    ['number (NaN)', { p: { type: 'number' } }, NaN, ['"value.p" must be a finite number']],
    ['number (Infinity)', { p: { type: 'number' } }, Infinity, ['"value.p" must be a finite number']],
    ['number (-Infinity)', { p: { type: 'number' } }, -Infinity, ['"value.p" must be a finite number']],
    ['integer (1.5)', { p: { type: 'integer' } }, 1.5, ['"value.p" must be an integer']],
    ['integer (Infinity)', { p: { type: 'integer' } }, Infinity, ['"value.p" must be an integer']],
    ['boolean', { p: { type: 'boolean' } }, 'true', ['"value.p" must be a boolean']],
    ['null', { p: { type: 'null' } }, 0, ['"value.p" must be null']],
    ['array', { p: { type: 'array' } }, { 0: 'a' }, ['"value.p" must be an array']],
    ['object', { p: { type: 'object' } }, [1], ['"value.p" must be an object']],
  ])('§7.2 reports the %s type message', (_name, properties, value, expected) => {
    expect(validateStructuredValue({ type: 'object', properties }, { p: value })).toEqual(expected);
  });

  it.each<[string, StructuredOutputSchema['properties'], unknown]>([
    ['string', { p: { type: 'string' } }, ''],
    ['number', { p: { type: 'number' } }, -1.25],
    ['integer given as a whole float', { p: { type: 'integer' } }, 2.0],
    ['boolean', { p: { type: 'boolean' } }, false],
    ['null', { p: { type: 'null' } }, null],
    ['null with const null', { p: { type: 'null', const: null } }, null],
  ])('accepts a matching %s', (_name, properties, value) => {
    expect(validateStructuredValue({ type: 'object', properties }, { p: value })).toEqual([]);
  });

  it('§7.2 enforces const null on the null type', () => {
    const schema: StructuredOutputSchema = { type: 'object', properties: { p: { type: 'null', const: null } } };
    expect(validateStructuredValue(schema, { p: null })).toEqual([]);
    expect(validateStructuredValue(schema, { p: 'null' })).toEqual(['"value.p" must be null']);
  });

  it.each<[string, StructuredOutputSchema['properties'], unknown, string[]]>([
    ['string enum', { p: { type: 'string', enum: ['a', 'b'] } }, 'c', ['"value.p" must be one of ["a","b"]']],
    ['string const', { p: { type: 'string', const: 'a' } }, 'b', ['"value.p" must be "a"']],
    ['number enum', { p: { type: 'number', enum: [1, 2.5] } }, 3, ['"value.p" must be one of [1,2.5]']],
    ['number const', { p: { type: 'number', const: 2.5 } }, 2.25, ['"value.p" must be 2.5']],
    ['integer enum', { p: { type: 'integer', enum: [1, 2] } }, 3, ['"value.p" must be one of [1,2]']],
    ['integer const', { p: { type: 'integer', const: 7 } }, 8, ['"value.p" must be 7']],
    ['boolean enum', { p: { type: 'boolean', enum: [true] } }, false, ['"value.p" must be one of [true]']],
    ['boolean const', { p: { type: 'boolean', const: false } }, true, ['"value.p" must be false']],
    ['null enum', { p: { type: 'null', enum: [null] } }, null, []],
    ['string enum holding a number-like string', { p: { type: 'string', enum: ['1'] } }, '1', []],
    ['integer enum compared strictly', { p: { type: 'integer', enum: [1] } }, 1, []],
    [
      'string enum with mixed entries',
      { p: { type: 'string', enum: ['a', 1, null] } },
      'b',
      ['"value.p" must be one of ["a",1,null]'],
    ],
  ])('§7.2 enforces %s', (_name, properties, value, expected) => {
    expect(validateStructuredValue({ type: 'object', properties }, { p: value })).toEqual(expected);
  });

  it.each<[string, unknown, string[]]>([
    ['only the type message when the type fails', 5, ['"value.p" must be a string']],
    ['only the enum message when enum and const both fail', 'c', ['"value.p" must be one of ["a","b"]']],
    ['the const message when enum passes', 'b', ['"value.p" must be "a"']],
    ['nothing when everything passes', 'a', []],
  ])('reports %s on a scalar', (_name, value, expected) => {
    const schema: StructuredOutputSchema = {
      type: 'object',
      properties: { p: { type: 'string', enum: ['a', 'b'], const: 'a' } },
    };
    expect(validateStructuredValue(schema, { p: value })).toEqual(expected);
  });

  it('§7.2 checks array items per index', () => {
    const schema: StructuredOutputSchema = {
      type: 'object',
      properties: { a: { type: 'array', items: { type: 'string' } } },
    };
    expect(validateStructuredValue(schema, { a: ['x', 1, 'y', false] })).toEqual([
      '"value.a[1]" must be a string',
      '"value.a[3]" must be a string',
    ]);
    expect(validateStructuredValue(schema, { a: [] })).toEqual([]);
    expect(validateStructuredValue(schema, { a: 'x' })).toEqual(['"value.a" must be an array']);
  });

  it('§7.2 accepts any array when items is absent', () => {
    const schema: StructuredOutputSchema = { type: 'object', properties: { a: { type: 'array' } } };
    expect(validateStructuredValue(schema, { a: [1, 'x', null, { b: [undefined] }, [NaN]] })).toEqual([]);
  });

  it('checks arrays of objects with indexed paths', () => {
    const schema: StructuredOutputSchema = {
      type: 'object',
      properties: {
        rows: {
          type: 'array',
          items: {
            type: 'object',
            properties: { id: { type: 'integer' }, name: { type: 'string' } },
            required: ['id'],
            additionalProperties: false,
          },
        },
      },
    };
    expect(validateStructuredValue(schema, { rows: [{ id: 1 }, { name: 'b' }, 'c', { id: 'x', extra: 1 }] })).toEqual([
      'missing required property "value.rows[1].id"',
      '"value.rows[2]" must be an object',
      '"value.rows[3].id" must be an integer',
      '"value.rows[3].extra" is not a declared property (additionalProperties: false)',
    ]);
  });

  it('qualifies paths through an object in an array in an object', () => {
    const schema: StructuredOutputSchema = {
      type: 'object',
      properties: {
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: { tags: { type: 'array', items: { type: 'string', enum: ['a', 'b'] } } },
          },
        },
      },
    };
    expect(validateStructuredValue(schema, { items: [{}, { tags: [] }, { tags: [3, 'c', 'a'] }] })).toEqual([
      '"value.items[2].tags[0]" must be a string',
      '"value.items[2].tags[1]" must be one of ["a","b"]',
    ]);
  });

  it('§7.2 enforces nested required and additionalProperties false', () => {
    const schema: StructuredOutputSchema = {
      type: 'object',
      properties: {
        outer: {
          type: 'object',
          properties: {
            inner: {
              type: 'object',
              properties: { x: { type: 'number' } },
              required: ['x'],
              additionalProperties: false,
            },
          },
          required: ['inner'],
          additionalProperties: false,
        },
      },
      required: ['outer'],
    };
    expect(validateStructuredValue(schema, {})).toEqual(['missing required property "value.outer"']);
    expect(validateStructuredValue(schema, { outer: { stray: 1 } })).toEqual([
      'missing required property "value.outer.inner"',
      '"value.outer.stray" is not a declared property (additionalProperties: false)',
    ]);
    expect(validateStructuredValue(schema, { outer: { inner: { y: 1 } }, top: true })).toEqual([
      'missing required property "value.outer.inner.x"',
      '"value.outer.inner.y" is not a declared property (additionalProperties: false)',
    ]);
  });

  it('§7.2 reports required, then declared properties, then undeclared keys', () => {
    const schema: StructuredOutputSchema = {
      type: 'object',
      properties: { b: { type: 'string' }, a: { type: 'string' } },
      required: ['a'],
      additionalProperties: false,
    };
    expect(validateStructuredValue(schema, { extra1: 1, a: 1, b: 2, extra2: 2 })).toEqual([
      '"value.b" must be a string',
      '"value.a" must be a string',
      '"value.extra1" is not a declared property (additionalProperties: false)',
      '"value.extra2" is not a declared property (additionalProperties: false)',
    ]);
    expect(validateStructuredValue(schema, { b: 2, extra: 1 })).toEqual([
      'missing required property "value.a"',
      '"value.b" must be a string',
      '"value.extra" is not a declared property (additionalProperties: false)',
    ]);
  });

  it('reports an undeclared key even when its value is undefined', () => {
    const schema: StructuredOutputSchema = { type: 'object', additionalProperties: false };
    expect(validateStructuredValue(schema, { a: undefined })).toEqual([
      '"value.a" is not a declared property (additionalProperties: false)',
    ]);
  });

  it('§7.2 only checks that the value is an object for a bare object schema', () => {
    const schema: StructuredOutputSchema = { type: 'object' };
    expect(validateStructuredValue(schema, {})).toEqual([]);
    expect(validateStructuredValue(schema, { any: [1, { thing: null }] })).toEqual([]);
    expect(validateStructuredValue(schema, 3)).toEqual(['"value" must be an object']);
  });

  it.each<[string, unknown]>([
    ['a Date', new Date(0)],
    ['a Map', new Map()],
    ['a class instance', new SchemaLike()],
  ])('rejects %s where an object is expected', (_name, value) => {
    expect(validateStructuredValue({ type: 'object' }, value)).toEqual(['"value" must be an object']);
  });

  it('does not let an inherited toString satisfy required', () => {
    const own: StructuredSchemaNode = { type: 'string' };
    const schema: StructuredOutputSchema = { type: 'object', properties: { toString: own }, required: ['toString'] };
    assertSupportedOutputSchema(schema);
    expect(validateStructuredValue(schema, {})).toEqual(['missing required property "value.toString"']);
    expect(validateStructuredValue(schema, { toString: 'own' })).toEqual([]);
  });

  it('does not check inherited values of declared properties', () => {
    const own: StructuredSchemaNode = { type: 'string' };
    const schema: StructuredOutputSchema = { type: 'object', properties: { constructor: own } };
    expect(validateStructuredValue(schema, {})).toEqual([]);
  });

  it('does not count an inherited schema name as declared for additionalProperties false', () => {
    const schema: StructuredOutputSchema = { type: 'object', additionalProperties: false };
    expect(validateStructuredValue(schema, { toString: 'x' })).toEqual([
      '"value.toString" is not a declared property (additionalProperties: false)',
    ]);
  });

  it('accepts null-prototype values', () => {
    const value = Object.assign(Object.create(null), { file: 'a', line: 1 });
    expect(validateStructuredValue(finding, value)).toEqual([]);
  });

  it('§7.2 throws on a forged node type, naming it', () => {
    const forged = { type: 'object', properties: { t: { type: 'tuple' } } } as unknown as StructuredOutputSchema;
    expect(() => validateStructuredValue(forged, { t: [1] })).toThrow(/tuple/);
    expect(() => validateStructuredValue({ type: 'tuple' } as unknown as StructuredOutputSchema, {})).toThrow(/tuple/);
  });

  it('§7.2 rejects properties given as an array at assert time', () => {
    expect(violationsOf({ type: 'object', properties: [] })).toEqual([
      'schema.properties must be an object of schemas',
    ]);
  });

  describe('agrees with ajv (strict mode) on validity of JSON values', () => {
    const ajv = new Ajv({ strict: true, allErrors: true });

    it.each<[string, StructuredOutputSchema, unknown[]]>([
      [
        'the every-keyword schema',
        everyKeyword,
        [
          { file: 'a', line: 1 },
          { file: 'a', line: 1.5 },
          { file: 'a' },
          { file: 'a', line: 1, location: { start: 1, stray: 2 } },
          { file: 'a', line: 1, tags: ['x', 2] },
          { file: 'a', line: 1, score: 0.75 },
          { file: 'a', line: 1, kind: 'bug', fixed: true },
          { file: 'a', line: 1, note: null, extra: [{}, 1] },
          [],
          'x',
          null,
        ],
      ],
      [
        'the finding schema',
        finding,
        [
          { file: 'a', line: 2 },
          { line: 'x', severity: 'mid' },
          { file: 'a', line: 1, kind: 'bug' },
          { file: 'a', line: 1, kind: 'x' },
        ],
      ],
    ])('on %s', (_name, schema, values) => {
      assertSupportedOutputSchema(schema);
      const validate = ajv.compile(schema);
      for (const value of values) {
        const json: unknown = JSON.parse(JSON.stringify(value));
        expect({ value: json, valid: validateStructuredValue(schema, json).length === 0 }).toEqual({
          value: json,
          valid: validate(json),
        });
      }
    });
  });
});

describe('§4.10 snapshotOutputSchema', () => {
  it('returns an equal deep copy of a supported schema', () => {
    const snapshot = snapshotOutputSchema(everyKeyword);
    expect(snapshot).toEqual(everyKeyword);
    expect(snapshot).not.toBe(everyKeyword);
    expect(snapshot.properties).not.toBe(everyKeyword.properties);
    expect(snapshot.properties?.location).not.toBe(everyKeyword.properties?.location);
  });

  it('is not affected by later mutation of the original', () => {
    const a: StructuredSchemaNode = { type: 'string', enum: ['x'] };
    const properties: Record<string, StructuredSchemaNode> = { a };
    const original = { type: 'object' as const, properties, required: ['a'], default: { a: 'x' } };
    const snapshot = snapshotOutputSchema(original);
    a.type = 'number';
    a.enum?.push('y');
    properties.b = { type: 'boolean' };
    original.required.push('b');
    original.default.a = 'changed';
    expect(snapshot).toEqual({
      type: 'object',
      properties: { a: { type: 'string', enum: ['x'] } },
      required: ['a'],
      default: { a: 'x' },
    });
    expect(validateStructuredValue(snapshot, { a: 'x' })).toEqual([]);
    expect(validateStructuredValue(snapshot, { a: 'y' })).toEqual(['"value.a" must be one of ["x"]']);
  });

  it('throws OutputSchemaError, not a clone error, for a function annotation', () => {
    const schema = { type: 'object', properties: { a: { type: 'string', default: () => 'x' } } };
    expect(() => snapshotOutputSchema(schema)).toThrow(OutputSchemaError);
    try {
      snapshotOutputSchema(schema);
    } catch (err) {
      expect(err).toBeInstanceOf(OutputSchemaError);
      expect((err as OutputSchemaError).code).toBe('UNSUPPORTED_SCHEMA');
      expect((err as OutputSchemaError).violations).toEqual([
        'schema.properties.a.default annotation must be JSON data',
      ]);
    }
  });

  it('throws OutputSchemaError for a Map annotation and for an unsupported schema', () => {
    expect(() => snapshotOutputSchema({ type: 'object', examples: new Map() })).toThrow(OutputSchemaError);
    expect(() => snapshotOutputSchema({ type: 'string' })).toThrow(`unsupported output schema: ${ROOT_NOT_OBJECT}`);
  });

  it('turns null-prototype and foreign-realm nodes into plain objects', () => {
    const foreign = runInNewContext('({ type: "object", properties: { a: { type: "string" } } })');
    const snapshot = snapshotOutputSchema(foreign);
    expect(Object.getPrototypeOf(snapshot)).toBe(Object.prototype);
    expect(snapshot).toEqual({ type: 'object', properties: { a: { type: 'string' } } });
  });
});
