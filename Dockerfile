# One image for api, worker, beat and flower; the command picks the role.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY lcm ./lcm
COPY api ./api
COPY workers ./workers
COPY cli ./cli
RUN pip install --no-cache-dir . && useradd --create-home lcm \
    && mkdir -p /data/files && chown lcm /data/files
USER lcm
EXPOSE 8000
CMD ["lcm", "api"]
