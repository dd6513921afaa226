// Sequential: modules applied one after another, each one's output the next one's input.
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace brigade::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  // Registers the module under its position ("0", "1", ...), so parameters read "2.weight".
  void push_back(std::shared_ptr<Module> module);
  // Registers it under `name` instead ("3": a model that holds only some of its layers keeps the
  // whole model's names). Names must be unique as always.
  void push_back(const std::string& name, std::shared_ptr<Module> module);
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  const std::vector<std::shared_ptr<Module>>& layers() const { return layers_; }

  std::string name() const override { return "Sequential"; }
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace brigade::nn
