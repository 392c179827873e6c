# The durable-subagents worker. Build: `docker build -t durable-subagents-worker .`
# (docker-compose.yml builds it as its `worker` service.)

# ---- Stage 1: compile TypeScript -------------------------------------------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app

# Dependencies first, so editing the sources does not invalidate this layer.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# What tsconfig.build.json compiles (its "include"); keep the two in step.
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
RUN npm run build

# ---- Stage 2: runtime: production dependencies and the compiled output only ----------------
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
# jemalloc in glibc's malloc's place, for the worker's native threads and V8's own allocations: it
# gives back what a burst of runs used, where glibc keeps it (docs/benchmarks.md, figure 6). The
# link names the library the same on every architecture; the build fails if the package has none.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjemalloc2 \
 && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc\.so\.2$')" /usr/local/lib/libjemalloc.so.2 \
 && rm -rf /var/lib/apt/lists/*
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2
WORKDIR /app

COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# Owned by root, so the worker process cannot modify its own code.
COPY --from=build /app/dist ./dist

# The unprivileged user that the official Node images ship (uid 1000).
USER node

# Starts a worker against TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE; stops cleanly on SIGTERM.
CMD ["node", "dist/src/worker/main.js"]
