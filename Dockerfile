# One image for every Triad process (scheduler, supervisor, agent host, example services, CLI).
# docker-compose.yml picks the process with `command:`; the default command prints the CLI help.
# See docs/decisions/0005-containers.md.
#
#   docker build -t triad .
#   docker run --rm triad                                  # triad --help
#   docker run --rm -e NATS_URL=nats://host:4222 triad triad submit orders --input '{"orderId":"o1","amount":42}'
#   docker run --rm -e NATS_URL=... -e REDIS_URL=... triad node apps/scheduler/dist/main.js
#
# It builds with the classic builder and with BuildKit alike (no `# syntax=` line, which would make
# BuildKit fetch a frontend image, and no `RUN --mount`), so Compose v1's own builder builds it too.
# The base image is a build argument (docker build --build-arg NODE_IMAGE=...): by default the
# official node image; scripts/containers/base-images.mjs builds a stand-in under that name where
# Docker Hub cannot be reached.
ARG NODE_IMAGE=node:24-bookworm-slim

# ---------------------------------------------------------------------------------------------
# manifests: the lock file and every package.json, alone, so that `npm ci` below is redone only when
# they change, not on every source change (COPY --from is cached by the content it copies).
# ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN mkdir -p /manifests \
 && cp package-lock.json /manifests/ \
 && find . -name package.json -not -path '*/node_modules/*' \
      -exec sh -c 'mkdir -p "/manifests/$(dirname "$1")" && cp "$1" "/manifests/$1"' sh {} \;

# ---------------------------------------------------------------------------------------------
# build: install everything (dev dependencies included), compile the TypeScript, then drop the
# dev dependencies and assemble in /out exactly the files that run.
# ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build

ENV CI=true \
    TURBO_TELEMETRY_DISABLED=1 \
    NPM_CONFIG_AUDIT=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_UPDATE_NOTIFIER=false

WORKDIR /app

# Exact install from package-lock.json, from the manifests alone (a layer reused until they change).
COPY --from=manifests /manifests/ ./
RUN npm ci

# The sources. The context is filtered by .dockerignore (no node_modules, dist, .git, test sources, ...).
COPY . .

# Build the apps and, through turbo's ^build, every package they depend on. The test workspace
# is not built: its sources are not in the context and nothing in the image runs them.
RUN npm run build -- --filter='./apps/*'

# Production dependencies only, then copy what runs: every workspace's package.json, dist/,
# its own node_modules (if npm did not hoist everything), and the non-TypeScript runtime files
# (packages/store/lua, apps/cli/bin, and apps/example-orders/orders.workflow.json for
# `triad workflows register`). node_modules/@triad/* are relative symlinks to the
# workspaces, so the layout under /out mirrors /app. Declarations and build info are dropped;
# the .js.map files stay for readable stack traces (--enable-source-maps).
RUN npm prune --omit=dev \
 && mkdir -p /out \
 && cp package.json package-lock.json /out/ \
 && cp -a node_modules /out/node_modules \
 && for ws in packages/* apps/* test; do \
      [ -f "$ws/package.json" ] || continue; \
      mkdir -p "/out/$ws"; \
      cp "$ws/package.json" "/out/$ws/"; \
      for part in dist node_modules lua bin; do \
        if [ -e "$ws/$part" ]; then cp -a "$ws/$part" "/out/$ws/$part"; fi; \
      done; \
    done \
 && cp apps/example-orders/orders.workflow.json /out/apps/example-orders/ \
 && find /out -name node_modules -prune -o \
      \( -name '*.tsbuildinfo' -o -name '*.d.ts' -o -name '*.d.ts.map' \) -type f -print0 \
    | xargs -0 -r rm -f \
 && test -f /out/apps/cli/bin/triad.js \
 && test -f /out/apps/example-orders/orders.workflow.json \
 && test -d /out/packages/store/lua

# ---------------------------------------------------------------------------------------------
# runtime: same base, production dependencies and compiled output only, non-root.
# ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime

ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps

WORKDIR /app

# Owned by root and not writable by the process: the app only needs to read its code.
# Runtime state lives in NATS and Redis; the health heartbeat file goes to /tmp.
COPY --from=build /out/ ./

# `triad` on PATH: `docker run --rm <image> triad submit ...` (and `docker compose exec agent triad ...`).
RUN ln -s /app/apps/cli/bin/triad.js /usr/local/bin/triad

# Documentation only: the example's stand-in services (INVENTORY_PORT, PAYMENT_PORT,
# SHIPPING_PORT, FRAUD_PORT). The actors listen on nothing.
EXPOSE 7101 7102 7103 7104

USER node

CMD ["triad", "--help"]
