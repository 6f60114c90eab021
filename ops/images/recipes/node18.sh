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
  "pnpm-12.21.0.tgz 66fd8278ee28935ce951792d34367ff3af5c432a2756445823029533835b8da529bbe0be5130afd56ed0713fb8789e47bad82d93bd5ae2fe54b15562d6276ef0 https://registry.npmjs.org/pnpm/-/pnpm-12.21.0.tgz"
  "yarn-1.22.22.tgz a6b2f7906b721bba3d67d4aff083df04dad64c399707841b7acf00f6b133b7ac24255f2652fa22ae3534329dc6180534e98d17432037ff6fd140556e2bb3137e https://registry.npmjs.org/yarn/-/yarn-1.22.22.tgz"
  "corepack-0.33.0.tgz 5d25f804d8ddc0f5e350493bff6af4bc586cd62af056770944cca3cc37a5dcf54a5a71d05de85c897d1692f0eb775ba32cb14945ef057996fd0120aa06d17f38 https://registry.npmjs.org/corepack/-/corepack-0.33.0.tgz"
)
IMAGE_ENV=()
CHECKS=(
  "node|^v18\.|node -v"
  "npm|^9\.|npm -v"
  "pnpm|^12\.|pnpm -v"
  "yarn|^1\.22\.|yarn -v"
  "corepack|^0\.33\.|corepack --version"
  "gcc|^gcc|gcc --version"
)
recipe_install() {
  node_tools_install pnpm-12.21.0.tgz yarn-1.22.22.tgz corepack-0.33.0.tgz
}
