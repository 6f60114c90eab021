# shellcheck shell=bash disable=SC2034
# kiwi/node:18: Debian's nodejs and npm, plus pnpm, yarn 1.x and corepack from
# the npm registry.
NAME=node18
REF=kiwi/node:18
RUNTIME=node
VERSION=18
DESCRIPTION="Debian nodejs 18 + npm 9, pnpm, yarn classic, corepack"
APT_PACKAGES=(nodejs npm build-essential python3)
DOWNLOADS=(
  "pnpm-10.34.9.tgz f49b5a8ea0fdedb44bb3c0c1d6575092a53c2950d95b7ad15df11f17974877a2de3a01c07e934e9b28ce716e51c09a94962c7306d09be2e1e4b18a8c8762fd32 https://registry.npmjs.org/pnpm/-/pnpm-10.34.9.tgz"
  "yarn-1.22.22.tgz a6b2f7906b721bba3d67d4aff083df04dad64c399707841b7acf00f6b133b7ac24255f2652fa22ae3534329dc6180534e98d17432037ff6fd140556e2bb3137e https://registry.npmjs.org/yarn/-/yarn-1.22.22.tgz"
  "corepack-0.33.0.tgz 5d25f804d8ddc0f5e350493bff6af4bc586cd62af056770944cca3cc37a5dcf54a5a71d05de85c897d1692f0eb775ba32cb14945ef057996fd0120aa06d17f38 https://registry.npmjs.org/corepack/-/corepack-0.33.0.tgz"
)
IMAGE_ENV=()
CHECKS=(
  "node|^v18\.|node -v"
  "npm|^9\.|npm -v"
  "pnpm|^10\.34\.9$|pnpm -v"
  "yarn|^1\.22\.|yarn -v"
  "corepack|^0\.33\.|corepack --version"
  "gcc|^gcc|gcc --version"
  "addon|^native ok$|mkdir -p /tmp/a && cd /tmp/a && printf '{\"targets\":[{\"target_name\":\"hello\",\"sources\":[\"hello.c\"]}]}' >binding.gyp && printf '#include <node_api.h>\nstatic napi_value Init(napi_env e, napi_value x) { napi_value s; napi_create_string_utf8(e, \"native ok\", NAPI_AUTO_LENGTH, &s); return s; }\nNAPI_MODULE(NODE_GYP_MODULE_NAME, Init)\n' >hello.c && printf '{\"name\":\"a\",\"version\":\"1.0.0\",\"scripts\":{\"install\":\"node-gyp rebuild\"}}' >package.json && npm install --offline --no-audit --no-fund >log 2>&1 && node -p 'require(\"./build/Release/hello.node\")'"
)
recipe_install() {
  node_tools_install pnpm-10.34.9.tgz yarn-1.22.22.tgz corepack-0.33.0.tgz
}
