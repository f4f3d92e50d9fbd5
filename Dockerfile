# syntax=docker/dockerfile:1
# CountBot image: one image for every process; the command picks the role
# (`gateway`, `worker`, `start`, `agent -m ...`). bin/countbot.js runs the build in dist/ (made in
# the build stage, as `npm install` makes it on a host), else the sources through tsx; the web
# console is built in a stage of its own and served from web/dist.

# Stage 1: production dependencies, installed from the lock file. Installing here rather than
# copying the host's node_modules gets the Linux builds of native packages (esbuild, under tsx).
# The package's `prepare` finds neither TypeScript nor Vite in a production install and skips.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/build-server.js scripts/prepare-web.js ./scripts/
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund

# Stage 2: the web console, built with the dev dependencies (Vite, Preact); only web/dist is kept.
FROM node:24-bookworm-slim AS web
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund --ignore-scripts
COPY web ./web
RUN npm run build:web

# Stage 3: the server build (tsc into dist/), with the dev dependencies it needs; only dist/ leaves it.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build-server.js ./scripts/
COPY src ./src
COPY channels ./channels
RUN node scripts/build-server.js

# Stage 4: the runtime, without npm's cache or build tools.
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    COUNTBOT_DATA_DIR=/data \
    COUNTBOT_WORKSPACE=/workspace \
    COUNTBOT_API_PORT=8787
WORKDIR /app
# bubblewrap: the exec tool's sandbox. Inside a container it needs user namespaces, which Docker's
# default seccomp profile refuses; docker-compose.yml allows them for the worker. Where it cannot
# build its sandbox, exec refuses every command (and says so at start and in `countbot doctor`).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*
# Code and dependencies stay owned by root: the `node` user can run them, not change them.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY channels ./channels
COPY config ./config
COPY --from=web /app/web/dist ./web/dist
# Built after the sources above were written, so bin/countbot.js takes it as current.
COPY --from=build /app/dist ./dist
# The state directories belong to `node`; a named volume mounted there starts with this owner.
RUN mkdir -p /data /workspace && chown node:node /data /workspace
USER node
EXPOSE 8787
# The gateway's /health (the default command); docker-compose.yml gives the worker its own check.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.COUNTBOT_API_PORT || 8787) + '/health').then((response) => process.exit(response.ok ? 0 : 1), () => process.exit(1))"
ENTRYPOINT ["node", "bin/countbot.js"]
CMD ["gateway"]
