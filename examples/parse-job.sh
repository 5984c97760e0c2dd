#!/usr/bin/env bash
# Prints, on stdout, a parse-file job for FILE as the service sends it to a
# custom-file-format app: the organization, project, languages and the file's
# content in base64. For trying an app and servicegate's contract checks by hand:
#
#   examples/parse-job.sh strings.txt | curl --data-binary @- localhost:8080/file-format
set -euo pipefail
file=${1:?usage: examples/parse-job.sh FILE}
name=$(basename "$file")
name=${name//\"/}
printf '{"jobType":"parse-file",'
printf '"organization":{"id":1,"domain":"acme.example","baseUrl":"http://localhost:8081","apiBaseUrl":"http://localhost:8081/api/v2"},'
printf '"project":{"id":1,"identifier":"demo","name":"Demo"},'
printf '"sourceLanguage":{"id":"en","name":"English","pluralCategoryNames":["one","other"]},'
printf '"targetLanguages":[{"id":"uk","name":"Ukrainian","pluralCategoryNames":["one","few","many","other"]}],'
printf '"file":{"id":1,"name":"%s","content":"' "$name"
base64 -w0 < "$file"
printf '"}}\n'
