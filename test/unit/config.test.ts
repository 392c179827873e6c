// Which server a process connects to: the Temporal CLI's configuration (the TEMPORAL_* variables
// over a profile of its TOML config file), read through @temporalio/envconfig. No server needed.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { codecFromEnv, connectClient, generateEncryptionKey, temporalSettingsFromEnv } from '../../src';
import { workerCachedRunsFromEnv } from '../../src/temporal/config';
import { endpointFromEnv } from '../../src/worker';
import { builtinProvider, providersFromEnv } from '../../src/providers/from-env';

describe('temporalSettingsFromEnv', () => {
  it('means the embedded server when TEMPORAL_ADDRESS is unset', () => {
    expect(temporalSettingsFromEnv({})).toBeUndefined();
  });

  it('reads address, namespace and an API key, which turns TLS on', () => {
    expect(
      temporalSettingsFromEnv({
        TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233',
        TEMPORAL_NAMESPACE: 'ns.acct',
        TEMPORAL_API_KEY: 'k',
      }),
    ).toEqual({
      address: 'ns.acct.tmprl.cloud:7233',
      namespace: 'ns.acct',
      apiKey: 'k',
      tls: true,
    });
    expect(
      temporalSettingsFromEnv({ TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false' }),
    ).toEqual({
      address: 'h:7233',
      namespace: 'default',
      apiKey: 'k',
    });
  });

  it('refuses a client certificate without its key with INVALID_CONFIG', () => {
    expect(() =>
      temporalSettingsFromEnv({ TEMPORAL_ADDRESS: 'h:7233', TEMPORAL_TLS_CLIENT_CERT_PATH: '/c.pem' }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
  });
});

describe('temporalSettingsFromEnv with the Temporal CLI config file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'subagent-envconfig-'));
  const configFile = join(dir, 'temporal.toml');
  writeFileSync(
    configFile,
    [
      '[profile.default]',
      'address = "default.example:7233"',
      '',
      '[profile.cloud]',
      'address = "ns.acct.tmprl.cloud:7233"',
      'namespace = "ns.acct"',
      'api_key = "from-file"',
      '[profile.cloud.grpc_meta]',
      'team = "agents"',
      '',
    ].join('\n'),
  );

  it('reads the default profile of TEMPORAL_CONFIG_FILE', () => {
    expect(temporalSettingsFromEnv({ TEMPORAL_CONFIG_FILE: configFile })).toEqual({
      address: 'default.example:7233',
      namespace: 'default',
    });
  });

  it('reads the profile TEMPORAL_PROFILE names, with its API key (TLS on) and gRPC metadata', () => {
    expect(temporalSettingsFromEnv({ TEMPORAL_CONFIG_FILE: configFile, TEMPORAL_PROFILE: 'cloud' })).toEqual({
      address: 'ns.acct.tmprl.cloud:7233',
      namespace: 'ns.acct',
      apiKey: 'from-file',
      tls: true,
      metadata: { team: 'agents' },
    });
  });

  it('lets the environment override the profile, field by field', () => {
    expect(
      temporalSettingsFromEnv({
        TEMPORAL_CONFIG_FILE: configFile,
        TEMPORAL_PROFILE: 'cloud',
        TEMPORAL_NAMESPACE: 'other',
        TEMPORAL_TLS: 'false',
      }),
    ).toEqual({
      address: 'ns.acct.tmprl.cloud:7233',
      namespace: 'other',
      apiKey: 'from-file',
      metadata: { team: 'agents' },
    });
  });

  it('refuses a profile that does not exist with INVALID_CONFIG', () => {
    expect(() => temporalSettingsFromEnv({ TEMPORAL_CONFIG_FILE: configFile, TEMPORAL_PROFILE: 'missing' })).toThrow(
      expect.objectContaining({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining("Profile 'missing' not found"),
      }),
    );
  });
});

describe('connectClient', () => {
  it('rejects with UNAVAILABLE, naming the address, when no server answers', async () => {
    await expect(
      connectClient({ env: { TEMPORAL_ADDRESS: '127.0.0.1:1' }, connectTimeoutMs: 500 }),
    ).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('cannot reach the Temporal server at 127.0.0.1:1'),
    });
  });

  it.each([NaN, 0, -1, 1e300, Infinity])(
    'refuses a connectTimeoutMs of %p with INVALID_CONFIG before connecting (it failed at once as UNAVAILABLE, "cannot reach the Temporal server", or waited for ever)',
    async (connectTimeoutMs) => {
      await expect(connectClient({ env: { TEMPORAL_ADDRESS: '127.0.0.1:1' }, connectTimeoutMs })).rejects.toMatchObject(
        { code: 'INVALID_CONFIG', message: expect.stringContaining('connectTimeoutMs') },
      );
    },
  );
});

describe('workerCachedRunsFromEnv', () => {
  it("is the SDK's default when unset or empty", () => {
    expect(workerCachedRunsFromEnv({})).toBeUndefined();
    expect(workerCachedRunsFromEnv({ SUBAGENT_WORKER_CACHED_RUNS: ' ' })).toBeUndefined();
  });

  it('reads a number of runs, 0 turning the cache off', () => {
    expect(workerCachedRunsFromEnv({ SUBAGENT_WORKER_CACHED_RUNS: '100' })).toBe(100);
    expect(workerCachedRunsFromEnv({ SUBAGENT_WORKER_CACHED_RUNS: '0' })).toBe(0);
  });

  it.each(['1', '-5', '2.5', 'many', '1e300'])('refuses %s with INVALID_CONFIG', (value) => {
    expect(() => workerCachedRunsFromEnv({ SUBAGENT_WORKER_CACHED_RUNS: value })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  });
});

describe('endpointFromEnv', () => {
  it('streams unless SUBAGENT_MODEL_STREAM is false, and refuses anything but true or false', () => {
    expect(endpointFromEnv({ SUBAGENT_MODEL: 'm' })).toEqual({ model: 'm' });
    expect(endpointFromEnv({ SUBAGENT_MODEL_STREAM: 'true' })).toEqual({});
    expect(endpointFromEnv({ SUBAGENT_MODEL_STREAM: 'false' })).toEqual({ stream: false });
    expect(() => endpointFromEnv({ SUBAGENT_MODEL_STREAM: 'no' })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  });

  it('trims the base URL, the key and the model (a URL with a space at its end asked for /v1%20/chat/completions)', () => {
    expect(
      endpointFromEnv({
        OPENAI_BASE_URL: ' http://127.0.0.1:8080/v1 ',
        OPENAI_API_KEY: 'sk-key\n',
        SUBAGENT_MODEL: 'm ',
      }),
    ).toEqual({ baseURL: 'http://127.0.0.1:8080/v1', apiKey: 'sk-key', model: 'm' });
  });

  it.each(['localhost:8080/v1', 'not a url', 'ftp://models.example/v1'])(
    'refuses OPENAI_BASE_URL=%s, not an http(s) URL, with INVALID_CONFIG',
    (value) => {
      expect(() => endpointFromEnv({ OPENAI_BASE_URL: value })).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining('OPENAI_BASE_URL') }),
      );
    },
  );

  it('reads the limits and the quota as positive whole numbers, and refuses anything else', () => {
    expect(
      endpointFromEnv({
        SUBAGENT_MAX_CONTEXT_CHARS: '9000',
        SUBAGENT_MODEL_MAX_TOKENS: '512',
        SUBAGENT_MODEL_REQUESTS_PER_MINUTE: '500',
        SUBAGENT_MODEL_TOKENS_PER_MINUTE: ' 30000 ',
        SUBAGENT_MODEL_TOKEN_BURST: '10000',
      }),
    ).toEqual({
      maxContextChars: 9000,
      maxTokens: 512,
      requestsPerMinute: 500,
      tokensPerMinute: 30000,
      tokenBurst: 10000,
    });
    for (const value of ['0', '-5', '1.5', 'lots']) {
      expect(() => endpointFromEnv({ SUBAGENT_MODEL_TOKENS_PER_MINUTE: value })).toThrow(
        expect.objectContaining({
          code: 'INVALID_CONFIG',
          message: expect.stringContaining('SUBAGENT_MODEL_TOKENS_PER_MINUTE'),
        }),
      );
    }
  });
});

describe('providersFromEnv', () => {
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty'])(
    'refuses SUBAGENT_PROVIDERS=%s, a name every object has, as not a built-in provider (INVALID_CONFIG)',
    (name) => {
      expect(() => providersFromEnv({ SUBAGENT_PROVIDERS: name })).toThrow(
        expect.objectContaining({
          code: 'INVALID_CONFIG',
          message: expect.stringContaining('is not a built-in provider'),
        }),
      );
    },
  );
});

describe('flags in the environment', () => {
  it.each([
    [
      'SUBAGENT_ENCRYPTION_ALLOW_PLAINTEXT',
      () =>
        codecFromEnv({
          SUBAGENT_ENCRYPTION_KEYS: `k1:${generateEncryptionKey()}`,
          SUBAGENT_ENCRYPTION_ALLOW_PLAINTEXT: 'TRUE',
        }),
    ],
    [
      'SUBAGENT_ACP_RESUMABLE',
      () => builtinProvider('acp', { SUBAGENT_ACP_COMMAND: 'agent', SUBAGENT_ACP_RESUMABLE: 'yes' }),
    ],
  ])('refuses %s other than true or false with INVALID_CONFIG (TRUE and yes had read as false)', (name, read) => {
    expect(read).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining(name) }));
  });

  it('reads true and false', () => {
    expect(builtinProvider('acp', { SUBAGENT_ACP_COMMAND: 'agent', SUBAGENT_ACP_RESUMABLE: 'true' }).resumable).toBe(
      true,
    );
    expect(builtinProvider('acp', { SUBAGENT_ACP_COMMAND: 'agent', SUBAGENT_ACP_RESUMABLE: 'false' }).resumable).toBe(
      false,
    );
  });
});
